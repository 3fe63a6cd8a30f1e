"""Loading Z-Image components from local files (never the network), as the placement says.

Every loader takes a `Source` from `resolve.py` and a placement from the device policy. A file or
folder that is present but unreadable, truncated, or of the wrong architecture raises `RunFailed`
naming it; a file that vanished since submit raises `ModelMissing`. Single files are read straight
onto the component's device into a model built on the meta device (no random initialisation, no
copy through CPU memory when the component lives on a GPU).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar, cast

import torch
from torch import nn

from inline_core.components.diffusers_zimage.libs import (
    assign_state,
    diffusers,
    load_safetensors,
    quiet,
    transformers,
)
from inline_core.components.diffusers_zimage.placement import (
    PlacementLike,
    home_device,
    quantize,
    torch_dtype,
)
from inline_core.errors import InlineError, ModelMissing, RunFailed
from inline_core.models.zimage.convert import (
    qwen3_from_single,
    transformer_from_original,
    vae_from_ldm,
)
from inline_core.models.zimage.header import read_header
from inline_core.models.zimage.infer import (
    ConfigInferenceError,
    infer_ldm_vae_config,
    infer_qwen3_config,
    infer_zimage_transformer_config,
    is_ldm_vae,
    is_qwen3,
    is_zimage_transformer,
)
from inline_core.models.zimage.resolve import Source

T = TypeVar("T")

# Z-Image Turbo's scheduler (used when the model is a single file without a scheduler config).
DEFAULT_SCHEDULER_CONFIG: dict[str, Any] = {
    "_class_name": "FlowMatchEulerDiscreteScheduler",
    "num_train_timesteps": 1000,
    "shift": 3.0,
    "use_dynamic_shifting": False,
}


def _guarded(what: str, source: Source, load: Callable[[], T]) -> T:
    """Run `load`, turning any failure into an error that names the file."""
    where = source.location
    if not where.exists():
        raise ModelMissing(f"the {what} {where} is gone (it was there at submit)")
    try:
        return load()
    except InlineError:
        raise
    except ConfigInferenceError as exc:
        raise RunFailed(f"the {what} {where} has an unexpected layout: {exc}") from exc
    except Exception as exc:
        raise RunFailed(f"cannot load the {what} from {where}: {_reason(exc)}") from exc


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


def _shapes(source: Source) -> dict[str, tuple[int, ...]]:
    return {k: v.shape for k, v in read_header(source.path).items()}


def _check_keys(what: str, source: Source, missing: list[str], unexpected: list[str]) -> None:
    if missing or unexpected:
        raise RunFailed(
            f"the {what} {source.location} does not match its inferred architecture "
            f"(missing {sorted(missing)[:5]}, unexpected {sorted(unexpected)[:5]})"
        )


def _place(module: nn.Module, placement: PlacementLike) -> nn.Module:
    """Move to where the module lives between uses, in its dtype, then quantize if asked."""
    module = module.to(device=home_device(placement), dtype=torch_dtype(placement.dtype))
    return quantize(module.eval(), placement)


def load_transformer(source: Source, placement: PlacementLike) -> nn.Module:
    quiet()

    def from_file() -> nn.Module:
        shapes = _shapes(source)
        if not is_zimage_transformer(shapes):
            raise RunFailed(f"{source.path} is not a Z-Image diffusion model (no Z-Image weights)")
        config = infer_zimage_transformer_config(shapes)
        state = transformer_from_original(
            load_safetensors(source.path, str(home_device(placement)))
        )
        with torch.device("meta"):
            model: nn.Module = diffusers().ZImageTransformer2DModel.from_config(config)
        _check_keys("diffusion model", source, *assign_state(model, state))
        return _place(model, placement)

    def from_folder() -> nn.Module:
        return _from_pretrained(diffusers().ZImageTransformer2DModel, source, placement)

    return _guarded("diffusion model", source, from_file if source.is_file else from_folder)


def load_vae(source: Source, placement: PlacementLike) -> nn.Module:
    quiet()

    def from_file() -> nn.Module:
        shapes = _shapes(source)
        if not is_ldm_vae(shapes):
            raise RunFailed(f"{source.path} is not a VAE in the FLUX/ComfyUI (LDM) key naming")
        config = infer_ldm_vae_config(shapes)
        state = vae_from_ldm(load_safetensors(source.path, str(home_device(placement))), config)
        with torch.device("meta"):
            model: nn.Module = diffusers().AutoencoderKL.from_config(config)
        _check_keys("vae", source, *assign_state(model, state))
        return _place(model, placement)

    def from_folder() -> nn.Module:
        return _from_pretrained(diffusers().AutoencoderKL, source, placement)

    return _guarded("vae", source, from_file if source.is_file else from_folder)


def _from_pretrained(model_class: Any, source: Source, placement: PlacementLike) -> nn.Module:
    """A diffusers model from a local folder (never the hub), placed as the policy says."""
    model: nn.Module = model_class.from_pretrained(
        str(source.path),
        subfolder=source.subfolder,
        local_files_only=True,
        dtype=torch_dtype(placement.dtype),
    )
    return _place(model, placement)


def load_text_encoder(source: Source, placement: PlacementLike) -> nn.Module:
    quiet()
    lib = transformers()

    def from_file() -> nn.Module:
        shapes = _shapes(source)
        if not is_qwen3(shapes):
            raise RunFailed(f"{source.path} is not a Qwen3 text encoder")
        config = lib.Qwen3Config(**infer_qwen3_config(shapes))
        state = qwen3_from_single(load_safetensors(source.path, str(home_device(placement))))
        with torch.device("meta"):
            expected = set(lib.Qwen3Model(config).state_dict())
        missing = sorted(expected - set(state))
        _check_keys("text encoder", source, missing, sorted(set(state) - expected))
        model: nn.Module = lib.Qwen3Model.from_pretrained(
            None, config=config, state_dict=state, dtype=torch_dtype(placement.dtype)
        )
        return _place(model, placement)

    def from_folder() -> nn.Module:
        model: nn.Module = lib.AutoModel.from_pretrained(
            str(source.path),
            subfolder=source.subfolder or "",
            local_files_only=True,
            dtype=torch_dtype(placement.dtype),
        )
        return _place(model, placement)

    return _guarded("text encoder", source, from_file if source.is_file else from_folder)


def load_tokenizer(source: Source) -> Any:
    quiet()

    def load() -> Any:
        tokenizer = transformers().AutoTokenizer.from_pretrained(
            str(source.path), subfolder=source.subfolder or "", local_files_only=True
        )
        if not getattr(tokenizer, "chat_template", None):
            raise RunFailed(f"the tokenizer in {source.location} has no chat template")
        return tokenizer

    return _guarded("tokenizer", source, load)


def load_scheduler_config(source: Source | None) -> dict[str, Any]:
    if source is None:
        return dict(DEFAULT_SCHEDULER_CONFIG)

    def load() -> dict[str, Any]:
        data: object = json.loads((source.location / "scheduler_config.json").read_text("utf-8"))
        if not isinstance(data, dict):
            raise RunFailed(f"{source.location / 'scheduler_config.json'} is not a JSON object")
        return dict(cast(dict[str, Any], data))

    return _guarded("scheduler config", source, load)
