"""Which loaded part packs (`engine/packing.py`: one rule for the stacks and the ranks), and what
a rank's loader (`engine/remote.py`) packs, in this process, without a group: the spec
says to pack only where the policy packs (absent otherwise, so the group's key is as before), the
rank packs its denoiser by the stacks' rule (`engine/packing.py`) in its node stack and in the
`sample` primitive's denoiser alone, and not where its copy would take more than half its share
of the budget."""

from __future__ import annotations

from typing import Any, cast

import pytest
import torch
from torch import nn
from zimage_support import CPU_DTYPES, kit_family

from inline_core.device import ParallelSpec, Placement
from inline_core.device.matmul import RankPacking
from inline_core.diffusion.packed_linear import PackedLinear, packable_bytes, packed_bytes
from inline_core.engine.group import ModelGroup, rank_spec
from inline_core.engine.packing import packing_load
from inline_core.engine.remote import load_for_rank
from inline_core.families.zimage.kit import KitPaths

pytestmark = pytest.mark.skipif(
    not cast(Any, torch.ops.mkldnn)._is_mkldnn_bf16_supported(),
    reason="oneDNN's bfloat16 matmul needs AVX512 (the packed layers are only made there)",
)
BF16 = {**CPU_DTYPES, "denoiser": "bfloat16"}


def _transformer(spec_args: dict[str, Any]) -> nn.Module:
    pipeline = load_for_rank(device="cpu", **spec_args)
    model: nn.Module = pipeline.denoiser.transformer
    return model


def test_a_rank_packs_its_denoiser_where_the_spec_says_so(kit: KitPaths) -> None:
    family = kit_family(kit.root)
    sources = family.files.resolve().require()
    plain = rank_spec(family, "node", sources, BF16)
    assert "packed" not in plain.args
    assert packed_bytes(_transformer(dict(plain.args))) == 0

    packed = rank_spec(family, "node", sources, BF16, packed=RankPacking(None))
    assert packed.key != plain.key  # a group holding the unpacked stack loads it again
    model = _transformer(dict(packed.args))
    wanted = packable_bytes(_transformer(dict(plain.args)), torch.bfloat16)
    assert wanted > 0 and packed_bytes(model) == wanted
    assert all(type(m) is PackedLinear for m in model.modules() if isinstance(m, nn.Linear))

    group = ModelGroup.for_split(ParallelSpec.of(ulysses=2), cuda=False)  # launches nothing
    try:
        transformer, scheduler = sources.require("transformer"), sources.get("scheduler")
        alone = group.denoiser_for(
            family, transformer, scheduler, "bfloat16", packed=RankPacking(None)
        ).spec
    finally:
        group.close()
    assert alone.args["stack"] == "denoiser"
    assert packed_bytes(_transformer(dict(alone.args))) == wanted


def test_a_rank_packs_nothing_over_its_share_of_the_budget(kit: KitPaths) -> None:
    family = kit_family(kit.root)
    sources = family.files.resolve().require()
    tight = rank_spec(family, "node", sources, BF16, packed=RankPacking(1024))
    model = _transformer(dict(tight.args))
    assert packed_bytes(model) == 0 and not any(type(m) is PackedLinear for m in model.modules())


def test_only_a_denoiser_computing_in_its_dtype_packs_where_the_policy_packs() -> None:
    def load() -> nn.Module:
        return nn.Linear(64, 64).to(torch.bfloat16)

    here = Placement("cpu", "bfloat16")
    kept = Placement("cpu", "bfloat16", storage="float8_e4m3fn")  # casts its file's weights

    def made(role: str | None, placement: Placement | None, packs: bool = True) -> type[object]:
        part = packing_load(load, role, placement, packs=packs, budget_bytes=None, name="part")
        return type(cast(object, part()))

    assert made("denoiser", here) is PackedLinear
    assert made("denoiser", here, packs=False) is nn.Linear
    assert made("vae", here) is nn.Linear
    assert made("denoiser", kept) is nn.Linear
    assert made(None, None) is nn.Linear
