"""One LoRA file's weights, ready for the forward: per adapted module a down and an up matrix
(the scale PEFT would apply, `lora_alpha / r`, folded into the up one), on the model's device and
dtype."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch

from inline_core.errors import InvalidRequest

DOWN, UP = ".lora_A.weight", ".lora_B.weight"


def modules_of(model: torch.nn.Module) -> dict[str, torch.nn.Module]:
    """A model's submodules by their dotted names (the names LoRA files use). The model itself
    (`named_modules`' "") is left out: what a per-model registry keeps of its key must never
    reach the key, or the key could never be collected."""
    return {name: module for name, module in model.named_modules() if name}  # pyright: ignore[reportUnknownVariableType]


@dataclass(frozen=True)
class LowRank:
    """One layer's pair, stored transposed and contiguous for `x @ down_t @ up_t` (a transposed
    view as the right operand measured 2.4x slower on the CPU)."""

    down_t: torch.Tensor  # (in, r)
    up_t: torch.Tensor  # (r, out), PEFT's scale `lora_alpha / r` folded in

    @property
    def rank(self) -> int:
        return int(self.down_t.shape[1])


@dataclass(frozen=True, eq=False)
class LoraWeights:
    name: str
    layers: Mapping[str, LowRank]  # module name in the model -> its low-rank pair

    @property
    def nbytes(self) -> int:
        return sum(
            t.numel() * t.element_size()
            for lr in self.layers.values()
            for t in (lr.down_t, lr.up_t)
        )

    def check_against(self, modules: Mapping[str, torch.nn.Module]) -> None:
        """Refuse a file whose layers the model lacks or whose shapes it does not have (a LoRA
        trained on another size of the model), naming the file."""
        for module_name, lr in self.layers.items():
            module = modules.get(module_name)
            if not isinstance(module, torch.nn.Linear):
                raise InvalidRequest(
                    f"loras/{self.name} adapts {module_name!r}, which this model has not"
                )
            want = (module.out_features, module.in_features)
            got = (int(lr.up_t.shape[1]), int(lr.down_t.shape[0]))
            if got != want or lr.up_t.shape[0] != lr.rank:
                raise InvalidRequest(
                    f"loras/{self.name} adapts {module_name!r} as {got[1]} -> {got[0]}; this "
                    f"model's layer is {want[1]} -> {want[0]}: the LoRA is for another model size"
                )


def from_state_dict(
    name: str,
    state: Mapping[str, torch.Tensor],
    *,
    prefix: str,
    alpha: float | None,
    device: torch.device,
    dtype: torch.dtype,
) -> LoraWeights:
    """Weights from a state dict in diffusers naming (`<prefix><module>.lora_A.weight`, alphas
    already folded in by the converter); `alpha` is PEFT's `lora_alpha` from the file's adapter
    metadata (None: scale 1, as diffusers loads a file without one)."""
    layers: dict[str, LowRank] = {}
    for key, down in state.items():
        if not key.endswith(DOWN):
            continue
        module = key[: -len(DOWN)].removeprefix(prefix)
        up = state.get(key[: -len(DOWN)] + UP)
        if up is None:
            raise InvalidRequest(f"loras/{name}: layer {module!r} has no up (B) matrix")
        rank = int(down.shape[0])
        scale = 1.0 if alpha is None else alpha / rank
        layers[module] = LowRank(
            down.to(device=device, dtype=dtype).T.contiguous(),
            (up.to(device=device, dtype=dtype) * scale).T.contiguous(),
        )
    if not layers:
        raise InvalidRequest(f"loras/{name} holds no LoRA layers this model can use")
    return LoraWeights(name, layers)
