"""Typed handles on the third-party libraries this package drives.

diffusers, transformers and safetensors are only partially typed; the untyped surface is confined
here (modules handed out as `Any`, small wrappers with real signatures) so the rest stays strict.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import torch


def module(name: str) -> Any:
    """Any (sub)module by dotted name, imported on first use."""
    return importlib.import_module(name)


def diffusers() -> Any:
    return importlib.import_module("diffusers")


def transformers() -> Any:
    return importlib.import_module("transformers")


def quiet() -> None:
    """Silence the libraries' progress bars and info logs (a server logs its own progress)."""
    d = diffusers()
    d.utils.logging.disable_progress_bar()
    d.utils.logging.set_verbosity_error()
    t = transformers()
    t.utils.logging.disable_progress_bar()
    t.utils.logging.set_verbosity_error()


def manual_seed(seed: int) -> None:
    cast(Any, torch).manual_seed(seed)


def to_floats(x: torch.Tensor) -> list[float]:
    return cast(list[float], cast(Any, x).tolist())


def vector_norm(x: torch.Tensor) -> torch.Tensor:
    return cast(torch.Tensor, cast(Any, torch.linalg).vector_norm(x))


def load_safetensors(path: Path, device: str = "cpu") -> dict[str, torch.Tensor]:
    st = importlib.import_module("safetensors.torch")
    return cast(dict[str, torch.Tensor], cast(Any, st).load_file(str(path), device=device))


def load_safetensors_view(path: Path, view: str, device: str = "cpu") -> dict[str, torch.Tensor]:
    """The tensors under the prefix `view` (an all-in-one checkpoint's part), the prefix cut,
    read as `load_safetensors` reads a whole file (mapped on a CPU)."""
    st = cast(Any, importlib.import_module("safetensors"))
    with st.safe_open(str(path), framework="pt", device=device) as f:
        keys = [k for k in cast(list[str], f.keys()) if k.startswith(view)]
        return {k[len(view) :]: cast(torch.Tensor, f.get_tensor(k)) for k in keys}


def save_safetensors(
    tensors: Mapping[str, torch.Tensor], path: Path, metadata: Mapping[str, str] | None = None
) -> None:
    st = importlib.import_module("safetensors.torch")
    cast(Any, st).save_file(dict(tensors), str(path), metadata=dict(metadata or {}) or None)


def assign_state(
    module: torch.nn.Module, state: Mapping[str, torch.Tensor]
) -> tuple[list[str], list[str]]:
    """Load `state` into `module` by assignment (so meta-initialised modules take the tensors);
    returns (missing keys, unexpected keys)."""
    result = cast(Any, module).load_state_dict(dict(state), strict=False, assign=True)
    return list(cast(list[str], result.missing_keys)), list(cast(list[str], result.unexpected_keys))
