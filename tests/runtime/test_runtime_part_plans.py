"""A warm render asks the device policy nothing: each part's placement, kept storage and packing
are decided once per file identity (`Stacks._plan`), and a replaced file is planned and loaded
again."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, cast

import pytest

from inline_core.contract.family import Family
from inline_core.device.policy import DevicePolicy, Placement
from inline_core.engine import stacks as stacks_module
from inline_core.families.standalone import FamilyRig, family_rig
from inline_core.families.zimage import ZImageFamily
from inline_core.families.zimage.kit import build_kit
from inline_core.models import source as source_module
from inline_core.runtime.step_cache import StepCacheChoice
from inline_core.sampling.loop import StepLoopSampler
from tests.call_counts import count_calls
from tests.families.zimage.zimage_harness import cpu_config

PARTS = ("transformer", "text_encoder", "vae", "tokenizer", "scheduler")
COMPONENTS = len(PARTS)


@pytest.fixture
def rig(tmp_path: Path) -> Any:
    build_kit(tmp_path / "models", layouts=("comfy",))
    sampler = StepLoopSampler()
    config = cpu_config(tmp_path / "models")
    made = family_rig(ZImageFamily, tmp_path / "models", sampler, config=config)
    yield made
    made.close()
    sampler.close()


def test_a_warm_assembly_places_no_part_again(
    rig: FamilyRig, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = rig.pipeline()
    assert rig.stats()["loads"] == COMPONENTS
    placements = count_calls(monkeypatch, rig.runtime, "placement")
    packing = count_calls(monkeypatch, rig.runtime, "packed_linear_choice")
    again = rig.pipeline()
    assert again is first
    assert placements == [] and packing == []
    assert rig.stats()["loads"] == COMPONENTS


def test_a_replaced_file_is_placed_and_loaded_again(
    rig: FamilyRig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(source_module, "IDENTITY_TTL_S", 0.0)  # a replaced file is seen at once
    first = rig.pipeline()
    vae = rig.sources().get("vae")
    assert vae is not None and vae.is_file
    stat = os.stat(vae.location)
    os.utime(vae.location, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    again = rig.pipeline()
    assert again is not first  # the VAE was loaded from the new file: a new assembly
    assert rig.stats()["loads"] == COMPONENTS + 1  # the VAE alone, under its new identity
    planned = [key[1] for key, _resident in rig.runtime.stacks().plans()]
    assert sorted(planned) == sorted([*PARTS, "vae"])


def test_the_policy_default_step_cache_is_asked_once_per_steps(
    rig: FamilyRig, monkeypatch: pytest.MonkeyPatch
) -> None:
    family: Family = rig.family
    policy: DevicePolicy = rig.runtime.policy()
    asked = count_calls(monkeypatch, policy, "step_cache")
    choice = StepCacheChoice()
    few, many = rig.runtime.step_cache_for(family, choice, 2), None
    for _ in range(3):
        assert rig.runtime.step_cache_for(family, choice, 2) == few
        many = rig.runtime.step_cache_for(family, choice, 50)
    assert few is None and many is not None  # the default differs by steps: both kept
    assert len(asked) == 2
    # A run's own choice is its own: never the kept default.
    off = StepCacheChoice(given=True, settings=None)
    assert rig.runtime.step_cache_for(family, off, 50) is None
    assert len(asked) == 2


def test_placements_match_the_policys(rig: FamilyRig) -> None:
    """The kept plan's placement is the policy's for the part's role (kept storage aside)."""
    rig.pipeline()
    stacks = rig.runtime.stacks()
    for (_family, name, _identity, _budget), key in stacks.plans():
        placement = cast(tuple[object, ...], key)[3]  # (owner, part, identity, placement)
        role = stacks.builder(rig.family).roles.get(name)
        if role is None:
            assert placement is None
            continue
        assert isinstance(placement, Placement)
        expected = rig.runtime.placement(rig.family, role)
        assert placement.device == expected.device and placement.dtype == expected.dtype


def test_another_budget_is_planned_again(rig: FamilyRig) -> None:
    """The kept storage depends on the budget: a part is planned again under another one (its
    resident value is found again where the plan comes out the same)."""
    first = rig.pipeline()
    stacks = rig.runtime.stacks()
    assert len(stacks.plans()) == COMPONENTS
    rig.runtime.residency.budget_bytes = 1 << 40
    assert rig.pipeline() is first  # float32 files computing in float32: the same placement
    assert len(stacks.plans()) == 2 * COMPONENTS
    assert rig.stats()["loads"] == COMPONENTS


def test_plans_are_bounded(rig: FamilyRig, monkeypatch: pytest.MonkeyPatch) -> None:
    """Plans for budgets (or files) no longer used are forgotten, the least recently used first;
    one forgotten is only planned again, its resident value found again where it is the same."""
    monkeypatch.setattr(stacks_module, "PLANS_KEPT", COMPONENTS + 2)
    first = rig.pipeline()
    stacks = rig.runtime.stacks()
    for budget in (1 << 40, 1 << 41):  # each another budget: every part planned again
        rig.runtime.residency.budget_bytes = budget
        assert rig.pipeline() is first
        assert len(stacks.plans()) <= COMPONENTS + 2
    budgets = {key[3] for key, _resident in stacks.plans()}
    assert 1 << 41 in budgets and len(stacks.plans()) == COMPONENTS + 2
    assert rig.stats()["loads"] == COMPONENTS  # nothing loaded again for a plan made again
