"""The two-stage path's pieces a request names (torch-free; read at submit): the latent
upsampler's folder, and which LoRAs adapt which pass.

The upsampler is a diffusers `LTX2LatentUpsamplerModel` folder or Lightricks' single file
(`upsampler_file.py`): the node's `upscale_model` in `latent_upscale_models/`, else the model
folder's own `latent_upsampler/` (Lightricks/LTX-2's diffusers repo has one), else the only one
in `latent_upscale_models/` made for the stack's version. One made for another version is
refused, naming both (`upsampler_version.py`), and the take names the one that ran.

The LoRAs on the node's `loras` input say which pass they adapt by `input/lora`'s `expert`, as a
two-model stack's do: `high` the first pass (from noise), `low` the refining pass (ComfyUI's
templates put the distilled LoRA there), `both` both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from inline_core.contract.files import read_json
from inline_core.contract.handles import LoraHandle
from inline_core.contract.lora_stacks import BOTH, HIGH, LOW
from inline_core.diffusion.adapters.stack import LoraStack
from inline_core.errors import InvalidRequest, ModelMissing, NotFound
from inline_core.families.ltx2.descriptor import UPSCALE_CATEGORY
from inline_core.families.ltx2.upsampler_file import is_upsampler_file
from inline_core.families.ltx2.upsampler_file import problem as upsampler_problem
from inline_core.families.ltx2.upsampler_version import NAMES, fits, mismatch
from inline_core.models.catalog import Catalog
from inline_core.models.source import Source

UPSAMPLER_CLASS = "LTX2LatentUpsamplerModel"
SUBFOLDER = "latent_upsampler"


def is_upsampler(folder: Path) -> bool:
    config = read_json(folder / "config.json")
    return config is not None and config.get("_class_name") == UPSAMPLER_CLASS


def refuse_idle_upsampler(params: Mapping[str, Any], node_id: str) -> None:
    """An upsampler named without `upscale` would be left unused: refused, not ignored."""
    named = params.get("upscale_model")
    if named and not params.get("upscale"):
        raise InvalidRequest(
            f"param 'upscale_model' ({named!r}) names the two-stage upscale's latent upsampler, "
            "which runs only with param 'upscale': set 'upscale', or clear 'upscale_model'",
            node_id=node_id,
        )


def is_upsampler_entry(path: Path, is_folder: bool) -> bool:
    return is_upsampler(path) if is_folder else is_upsampler_file(path)


def upsampler_path(
    params: Mapping[str, Any],
    transformer: Source | None,
    catalog: Catalog,
    node_id: str,
    version: str,
) -> Path:
    """The latent upsampler the render uses (a folder or a file), made for the stack's `version`
    (`upsampler_version.py`); `model_missing` saying where to put one, or what the named file
    lacks, and a 422 naming both versions where it was made for another."""
    root = catalog.root / UPSCALE_CATEGORY
    named = params.get("upscale_model")
    if named:
        try:
            entry = catalog.entry(UPSCALE_CATEGORY, str(named))
        except NotFound as exc:
            raise ModelMissing(f"{named!r} is not in {root}", node_id=node_id) from exc
        if not is_upsampler_entry(entry.path, entry.is_folder):
            raise ModelMissing(
                f"{UPSCALE_CATEGORY}/{named} is not LTX-2's latent upsampler: a diffusers "
                f"{UPSAMPLER_CLASS} folder (config.json and weights) or Lightricks' "
                "ltx-2-spatial-upscaler-x2 file",
                node_id=node_id,
            )
        if not entry.is_folder:
            refuse_bad_file(entry.path, node_id)
        if not fits(entry.path, entry.is_folder, version):
            message = mismatch(entry.path, entry.is_folder, version)
            raise InvalidRequest(f"param 'upscale_model': {message}", node_id=node_id)
        return entry.path
    if transformer is not None and transformer.subfolder is not None:
        own = transformer.path / SUBFOLDER
        if is_upsampler(own):
            if not fits(own, True, version):
                raise ModelMissing(mismatch(own, True, version), node_id=node_id)
            return own
    # An upsampler named by no param: the one made for this version (any other is not taken).
    found = [
        e for e in catalog.entries(UPSCALE_CATEGORY) if is_upsampler_entry(e.path, e.is_folder)
    ]
    fitting = [e.path for e in found if fits(e.path, e.is_folder, version)]
    if len(fitting) == 1:
        return fitting[0]
    if len(found) == 1:  # the only one, unreadable or another version's: say which
        only = found[0]
        if not only.is_folder:
            refuse_bad_file(only.path, node_id)
        raise ModelMissing(mismatch(only.path, only.is_folder, version), node_id=node_id)
    if fitting:
        raise ModelMissing(
            f"param 'upscale' found {len(fitting)} latent upsamplers made for this model's "
            f"version in {root}: name one in 'upscale_model'",
            node_id=node_id,
        )
    raise ModelMissing(
        f"param 'upscale' needs LTX-2's latent upsampler made for {NAMES[version]}: a diffusers "
        f"{UPSAMPLER_CLASS} folder or Lightricks' ltx-2-spatial-upscaler-x2 file in {root} "
        f"(name it in 'upscale_model' when there are several), or the model folder's "
        f"{SUBFOLDER}/",
        node_id=node_id,
    )


def upsampler_name(path: Path, catalog: Catalog) -> str:
    """The upsampler as the take names it: its path under the models folder."""
    try:
        return path.relative_to(catalog.root).as_posix()
    except ValueError:
        return str(path)


def refuse_bad_file(path: Path, node_id: str) -> None:
    problem = upsampler_problem(path)
    if problem is not None:
        raise ModelMissing(
            f"the latent upsampler {path} cannot be read: {problem}", node_id=node_id
        )


def pass_stacks(
    handles: Sequence[LoraHandle], upscale: bool, title: str, node_id: str
) -> tuple[LoraStack, LoraStack]:
    """The first pass's LoRAs and the refining pass's, in edge order."""
    if not upscale:
        for handle in handles:
            if handle.expert != BOTH:
                raise InvalidRequest(
                    f"loras/{handle.use.name} is on the {handle.expert!r} pass; {title} renders "
                    "one pass without param 'upscale' (set expert 'both')",
                    node_id=node_id,
                )
        return tuple(h.use for h in handles), ()
    first = tuple(h.use for h in handles if h.expert in (BOTH, HIGH))
    refine = tuple(h.use for h in handles if h.expert in (BOTH, LOW))
    return first, refine
