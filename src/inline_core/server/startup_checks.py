"""Settings checked when the server starts, before anything is opened: a setting whose extra is
not installed is refused with the command that installs it (rather than every run failing on
the missing module later), and settings that cannot do what they ask are said so in the log.

All of it torch-free: modules are looked up, never imported.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from inline_core.config import Config
from inline_core.device.detect import gpu_device_nodes_present
from inline_core.device.split import ParallelSpec
from inline_core.errors import InvalidRequest
from inline_core.models.catalog import CATEGORIES
from inline_core.runtime.video import video_available

log = logging.getLogger(__name__)

GPU_PROFILES = ("gpu-max", "lowvram")


@dataclass(frozen=True)
class ExtraNeed:
    """A setting that only works with an extra installed."""

    setting: Callable[[Config], str | None]  # how the user asked for it; None: not asked
    modules: tuple[str, ...]  # what the extra installs, looked up without importing
    extra: str  # `./webui.sh --install --extra <extra>`


def _split(config: Config) -> str | None:
    if not config.parallel:
        return None
    try:
        spec = ParallelSpec.parse(config.parallel)
    except InvalidRequest:
        return None  # a malformed split is refused later with its own message
    return f"--multi-gpu {config.parallel} (INLINE_PARALLEL)" if spec.is_split else None


def _database(config: Config) -> str | None:
    return "--database-url (INLINE_DATABASE_URL)" if config.database_url else None


EXTRA_NEEDS = (
    ExtraNeed(_split, ("torch", "cache_dit"), "parallel"),
    ExtraNeed(_database, ("psycopg", "psycopg_pool"), "diffusers,postgres"),
)


def module_missing(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is None
    except (ImportError, ValueError):  # a parent package missing, or a broken module
        return True


def check_extras(config: Config, needs: tuple[ExtraNeed, ...] = EXTRA_NEEDS) -> None:
    """Refuse (InvalidRequest) a setting whose extra is not installed, naming the fix."""
    for need in needs:
        asked = need.setting(config)
        if asked is None:
            continue
        missing = [m for m in need.modules if module_missing(m)]
        if missing:
            raise InvalidRequest(
                f"{asked} needs the {need.extra.split(',')[-1]} extra, and "
                f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not installed: "
                f"./webui.sh --install --extra {need.extra} (or pip install "
                f"'inline-core[{need.extra}]')"
            )


def profile_warning(
    config: Config, gpu_present: Callable[[], bool] = gpu_device_nodes_present
) -> str | None:
    """What to say when a GPU profile is asked for on a machine with no GPU to run it."""
    profile = (config.profile or "").strip().lower().replace("_", "-")
    if profile not in GPU_PROFILES or gpu_present():
        return None
    return (
        f"--profile {profile} asked for, but this machine has no GPU (no GPU driver device "
        "found): running the cpu profile instead"
    )


def prepare_models_folder(folder: Path) -> str | None:
    """A models folder that does not exist is created with its category folders (as ComfyUI
    lays them out); what was done, for the log."""
    if folder.is_dir():
        return None
    try:
        for category in CATEGORIES:
            (folder / category).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return (
            f"the models folder {folder.absolute()} does not exist and could not be created "
            f"({exc.strerror or exc}): no model node can run; pass --models-dir an existing folder"
        )
    return (
        f"the models folder {folder.absolute()} did not exist: created it with its category "
        f"folders ({', '.join(c + '/' for c in CATEGORIES[:3])} ...); put model files there, "
        "or write tiny test models with: inline-core kit --out " + str(folder)
    )


def video_warning(available: Callable[[], bool] = video_available) -> str | None:
    """What to say when MP4 video takes cannot be written (PyAV, the `video` extra, missing)."""
    if available():
        return None
    return (
        "MP4 video takes need the video extra, and av (PyAV) is not installed: "
        "./webui.sh --install --extra video (or pip install 'inline-core[video]'); until then a "
        "video node asked for format mp4 is refused at submit (format png works)"
    )


def startup_warnings(config: Config) -> list[str]:
    said = [profile_warning(config), prepare_models_folder(config.models_dir), video_warning()]
    return [s for s in said if s is not None]
