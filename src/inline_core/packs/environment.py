"""Building a pack's own environment: a venv under the packs folder, never the server's.

With uv (on PATH, beside this interpreter, or the `uv` package) a venv and an install take
seconds; without it the standard library's venv and that venv's pip do the same, slower.
`INLINE_PACKS_INSTALLER=pip` forces pip.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from inline_core.packs.errors import PackRefused
from inline_core.packs.index_options import IndexOptions, pip_index_options

INSTALL_TIMEOUT_S = 1800
_OUTPUT_TAIL = 3000
# Variables a build or a worker must not inherit: the server's secrets and its own interpreter.
_DROPPED_PREFIXES = ("INLINE_",)
_DROPPED = frozenset({"VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "CONDA_PREFIX"})


def build_env(base: Mapping[str, str]) -> dict[str, str]:
    """The environment an installer runs with: the caller's, less the server's own variables."""
    return {
        k: v for k, v in base.items() if k not in _DROPPED and not k.startswith(_DROPPED_PREFIXES)
    }


def env_python(env_dir: Path) -> Path:
    return env_dir / "bin" / "python"


def find_uv() -> str | None:
    on_path = shutil.which("uv")
    if on_path:
        return on_path
    beside = Path(sys.executable).parent / "uv"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    try:
        from uv import find_uv_bin  # pyright: ignore[reportMissingTypeStubs]
    except ImportError:
        return None
    try:
        return str(find_uv_bin())
    except FileNotFoundError:
        return None


def base_python() -> str:
    """The interpreter a pack's venv is made from: the one this server's venv was made from."""
    return str(getattr(sys, "_base_executable", None) or sys.executable)


def _run(command: Sequence[str], what: str, env: Mapping[str, str]) -> None:
    try:
        done = subprocess.run(
            list(command),
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT_S,
            env=dict(env),
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise PackRefused(f"{what} took longer than {INSTALL_TIMEOUT_S} s") from exc
    except OSError as exc:
        raise PackRefused(f"{what} could not start: {exc}") from exc
    if done.returncode != 0:
        tail = (done.stderr or done.stdout)[-_OUTPUT_TAIL:].strip()
        raise PackRefused(f"{what} failed (exit {done.returncode}):\n{tail}")


@dataclass(frozen=True)
class Installer:
    """Creates an environment and installs requirements into it, with uv or with pip."""

    uv: str | None
    index: IndexOptions

    @property
    def name(self) -> str:
        return "uv" if self.uv else "pip"

    @classmethod
    def choose(cls, preference: str = "auto") -> Installer:
        if preference not in ("auto", "uv", "pip"):
            raise PackRefused(f"INLINE_PACKS_INSTALLER must be auto, uv or pip, got {preference!r}")
        uv = None if preference == "pip" else find_uv()
        if preference == "uv" and uv is None:
            raise PackRefused("INLINE_PACKS_INSTALLER=uv, but no uv was found")
        return cls(uv=uv, index=pip_index_options() if uv else IndexOptions())

    def create(self, env_dir: Path, env: Mapping[str, str]) -> None:
        if self.uv:
            command = [self.uv, "venv", "--quiet", "--python", base_python(), str(env_dir)]
        else:
            command = [base_python(), "-m", "venv", str(env_dir)]
        _run(command, f"creating the environment with {self.name}", env)

    def install(self, env_dir: Path, requirements: Sequence[str], env: Mapping[str, str]) -> None:
        python = str(env_python(env_dir))
        if self.uv:
            command = [self.uv, "pip", "install", "--quiet", "--python", python]
            command += self.index.uv_flags()
        else:
            command = [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        _run([*command, *requirements], f"installing the pack's dependencies with {self.name}", env)
