"""Z-Image's control branch (torch side): the control models a transformer's requests use, loaded
once per file into the resident cache, and run on the rows of a batched forward that asked for one.

diffusers' `ZImageControlNetModel` re-embeds and refines the latents and captions with the
transformer's own modules (`from_transformer`), runs its control blocks, and returns one hint per
control place, scaled by `conditioning_scale`, that the transformer adds after that layer. Here
the scale is a per-row tensor, so requests with different control images and strengths share one
control forward; rows of requests without control get zero hints (their sums are unchanged, so a
plain request batched beside a control request keeps its pixels), and requests with different
control models run each model on their own rows. The transformer's modules are lent to a control
model only for its forward, so a cached one never pins a transformer that was evicted.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Hashable, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import torch
from torch import nn

from inline_core.diffusion.files.header import read_header
from inline_core.diffusion.libs import assign_state, diffusers, load_safetensors, module, quiet
from inline_core.diffusion.loading import guarded
from inline_core.diffusion.residency import Footprint
from inline_core.errors import InvalidRequest, RunFailed
from inline_core.families.zimage import controlnet
from inline_core.families.zimage.controlnet import ControlUse
from inline_core.models.source import Source

# (key, load) -> the value, loading it on a miss (the residency cache's `get`).
Fetch = Callable[[Hashable, Callable[[], tuple[Any, Footprint]]], Any]
# Row indexes -> the LoRA rows of those rows, for the length of a forward over them.
RowsFor = Callable[[Sequence[int]], AbstractContextManager[None]]

SEQ_MULTIPLE = 32  # Z-Image pads each item's image and caption tokens to this
_SHARED = (
    "t_scale",
    "t_embedder",
    "all_x_embedder",
    "cap_embedder",
    "rope_embedder",
    "noise_refiner",
    "context_refiner",
    "x_pad_token",
    "cap_pad_token",
)


@dataclass(frozen=True, eq=False)
class RowControl:
    """One row's control: the model, its control context `(C, 1, h, w)` and strength."""

    use: ControlUse
    context: torch.Tensor


def load_control_model(
    source: Source, transformer: nn.Module, device: torch.device, dtype: torch.dtype
) -> nn.Module:
    """The control model in `source` (a single file or a diffusers folder), checked against the
    transformer it will drive."""
    quiet()
    return guarded("control model", source, lambda: _load(source, transformer, device, dtype))


def _load(
    source: Source, transformer: nn.Module, device: torch.device, dtype: torch.dtype
) -> nn.Module:
    model_class: Any = diffusers().ZImageControlNetModel
    t_config = dict(cast(Any, transformer).config)
    if source.is_file:
        shapes = {k: v.shape for k, v in read_header(source.path).items()}
        if not controlnet.is_zimage_control(shapes):
            raise InvalidRequest(f"{source.path.name} is not {controlnet.EXPECTED}")
        state = load_safetensors(source.path, str(device))
        before = state.get("control_noise_refiner.0.before_proj.weight")
        zero = None if before is None else not bool(before.any())
        config = controlnet.infer_config(shapes, int(t_config["n_layers"]), zero)
        convert = module("diffusers.loaders.single_file_utils")
        state = convert.convert_z_image_controlnet_checkpoint_to_diffusers(state, config)
        with module("accelerate").init_empty_weights(include_buffers=False):
            model = cast(nn.Module, model_class.from_config(config))
        missing, unexpected = assign_state(model, state)
        if missing or unexpected:
            raise RunFailed(
                f"the control model {source.path} does not match its inferred architecture "
                f"(missing {sorted(missing)[:5]}, unexpected {sorted(unexpected)[:5]})"
            )
    else:
        model = cast(
            nn.Module,
            model_class.from_pretrained(
                str(source.path), subfolder=source.subfolder, local_files_only=True
            ),
        )
    why = controlnet.mismatch(dict(cast(Any, model).config), t_config)
    if why is not None:
        raise InvalidRequest(f"{source.location.name} cannot drive this Z-Image model: {why}")
    return model.to(device=device, dtype=dtype).eval()


def own_bytes(model: nn.Module) -> int:
    return sum(p.numel() * p.element_size() for p in model.parameters())


class ControlBranch:
    def __init__(
        self,
        transformer: nn.Module,
        device: torch.device,
        dtype: torch.dtype,
        fetch: Fetch | None,
        scope: Hashable,
    ) -> None:
        self.transformer = transformer
        self.device = device
        self.dtype = dtype
        self._fetch = fetch
        self._local: dict[Hashable, nn.Module] = {}
        self._scope = scope  # the transformer's resident key
        self.loads = 0

    def model(self, use: ControlUse) -> nn.Module:
        """The loaded control model of `use` (loading it on first use)."""
        key = ("controlnet", self._scope, use.identity, str(self.device), str(self.dtype))

        def load() -> tuple[nn.Module, Footprint]:
            model = load_control_model(
                Source(Path(use.path)), self.transformer, self.device, self.dtype
            )
            self.loads += 1
            return model, Footprint(own_bytes(model))

        if self._fetch is not None:
            return cast(nn.Module, self._fetch(key, load))
        if key not in self._local:  # a rank: no server residency, one model per file
            self._local[key] = load()[0]
        return self._local[key]

    def in_dim(self, use: ControlUse) -> int:
        return int(cast(Any, self.model(use)).config.control_in_dim)

    def block_samples(
        self,
        x: Sequence[torch.Tensor],
        t: torch.Tensor,
        caps: Sequence[torch.Tensor],
        controls: Sequence[RowControl | None],
        rows_for: RowsFor,
    ) -> dict[int, torch.Tensor] | None:
        """The hints to add after each control place, `(rows, tokens, dim)` for the whole batch
        (None: no row has control)."""
        groups: dict[str, list[int]] = {}
        for i, c in enumerate(controls):
            if c is not None:
                groups.setdefault(c.use.identity, []).append(i)
        if not groups:
            return None
        lengths = [_padded(_tokens(xi)) + _padded(len(ci)) for xi, ci in zip(x, caps, strict=True)]
        longest = max(lengths)
        out: dict[int, torch.Tensor] = {}
        for rows in groups.values():
            first = cast(RowControl, controls[rows[0]])
            model = self.model(first.use)
            scale = torch.tensor(
                [cast(RowControl, controls[i]).use.strength for i in rows],
                device=self.device,
                dtype=self.dtype,
            ).view(-1, 1, 1)
            context = [cast(RowControl, controls[i]).context for i in rows]
            with rows_for(rows), _lent(model, self.transformer):
                hints = cast(
                    dict[int, torch.Tensor],
                    model(
                        [x[i] for i in rows],
                        t[rows],
                        [caps[i] for i in rows],
                        context,
                        conditioning_scale=scale,
                    ),
                )
            for place, hint in hints.items():
                full = out.get(place)
                if full is None:
                    full = out[place] = hint.new_zeros((len(x), longest, hint.shape[-1]))
                for j, i in enumerate(rows):
                    full[i, : lengths[i]] += hint[j, : lengths[i]]
        return out


@contextmanager
def _lent(model: nn.Module, transformer: nn.Module) -> Generator[None]:
    """The transformer's modules lent to a control model for one forward."""
    diffusers().ZImageControlNetModel.from_transformer(model, transformer)
    try:
        yield
    finally:
        for name in _SHARED:
            setattr(model, name, None)


def _tokens(latent: torch.Tensor) -> int:
    """Image tokens of one `(C, F, H, W)` latent: 2x2 patches."""
    _c, f, h, w = latent.shape
    return f * (h // 2) * (w // 2)


def _padded(n: int) -> int:
    return n + (-n) % SEQ_MULTIPLE
