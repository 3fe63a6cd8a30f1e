"""A family node's submit check is kept across renders that change only the seed or a prompt
(`families/nodes/family_node.py`: `KeptChecks`): the check is handed no seed and no text, so what
it found holds for them. Anything it did read that changes (a param, a model file, a LoRA file, a
file outside the catalog, the registry) checks the node again, and a refusal is never kept."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from zimage_harness import cpu_config, models_without_diffusion, node_params

from inline_core.contract.handles import LoraHandle
from inline_core.contract.registry import Families
from inline_core.contract.sources import Resolution, Sources
from inline_core.contract.submit import Submit
from inline_core.errors import InvalidRequest, ModelMissing
from inline_core.families.nodes import family_node
from inline_core.families.nodes.loras import LoraPicker
from inline_core.families.standalone import FamilyRig, family_rig
from inline_core.families.zimage import ZImageFamily
from inline_core.families.zimage.kit import KitPaths
from inline_core.graph.runner import SubmitFacts
from inline_core.models import source as source_module
from inline_core.sampling.loop import StepLoopSampler
from tests.call_counts import count_calls

MODEL = "z_image_turbo.safetensors"


def models(kit: KitPaths, root: Path) -> Path:
    """The kit's files in ComfyUI's layout, its LoRAs included, in a folder of the test's own."""
    assert kit.diffusion_file is not None
    models_without_diffusion(kit, root)
    shutil.copy(kit.diffusion_file, root / "diffusion_models" / MODEL)
    (root / "loras").mkdir()
    for path in kit.loras.values():
        shutil.copy(path, root / "loras" / path.name)
    return root


def rig_on(root: Path, sampler: StepLoopSampler, **config: Any) -> Iterator[FamilyRig]:
    made = family_rig(ZImageFamily, root, sampler, config=cpu_config(root, **config))
    yield made
    made.close()


@pytest.fixture
def root(kit: KitPaths, tmp_path: Path) -> Path:
    return models(kit, tmp_path / "models")


@pytest.fixture
def rig(root: Path, sampler: StepLoopSampler) -> Iterator[FamilyRig]:
    yield from rig_on(root, sampler)


def facts(prompt: str = "a fox", generation: int = 0, **upstream: list[object]) -> SubmitFacts:
    """The node with its prompt wired in from an `input/text` (which prepares its text)."""
    wired = frozenset({"prompt", *upstream})
    return SubmitFacts(wired, lambda: {}, {"prompt": [prompt], **upstream}, generation)


def bump(path: Path) -> None:
    """The file replaced by one of the same size: only its mtime says so."""
    stat = os.stat(path)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))


def test_the_check_sees_no_seed_and_no_text(
    rig: FamilyRig, monkeypatch: pytest.MonkeyPatch
) -> None:
    family = rig.family
    seen: list[Mapping[str, Any]] = []
    submits: list[Submit] = []
    real_resolve, real_check = family.resolve, family.check

    def resolve(node_type: str, params: Mapping[str, Any]) -> Resolution:
        seen.append(params)
        return real_resolve(node_type, params)

    def check(submit: Submit) -> None:
        seen.append(submit.params)
        submits.append(submit)
        real_check(submit)

    monkeypatch.setattr(family, "resolve", resolve)
    monkeypatch.setattr(family, "check", check)
    params = node_params(seed=1234)
    rig.node().check_node("z", params, facts("a fox in the snow"))
    assert len(seen) == 2
    for view in seen:
        assert "seed" not in view and "seed" not in list(view)
        assert view.get("seed") is None
        with pytest.raises(KeyError, match="seed"):
            view["seed"]
        assert dict(view) == {k: v for k, v in params.items() if k != "seed"}
    assert submits[0].upstream == {}  # the prompt's text is not there either
    # A Submit built from plain params (a family's own tests) leaves the seed out too.
    plain = Submit("x", {"seed": 1, "steps": 2}, "n", submits[0].resolution, frozenset(), {}, {})
    assert dict(plain.params) == {"steps": 2}


def test_a_new_seed_or_prompt_is_not_checked_again(
    rig: FamilyRig, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = rig.node()
    resolves = count_calls(monkeypatch, rig.family, "resolve")
    checks = count_calls(monkeypatch, rig.family, "check")
    first = runner.check_node("z", node_params(seed=1), facts("a fox"))
    for seed, prompt in ((2, "a fox"), (3, "a fox in the snow"), (-1, "")):
        assert runner.check_node("z", node_params(seed=seed), facts(prompt)) is first
    assert len(resolves) == len(checks) == 1
    assert runner.kept_checks() == 1


def test_any_other_param_or_wiring_is_checked_again(
    rig: FamilyRig, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = rig.node()
    checks = count_calls(monkeypatch, rig.family, "check")
    runner.check_node("z", node_params(), facts())
    runner.check_node("z", node_params(steps=5), facts())
    runner.check_node("z", node_params(negative_prompt="blur"), facts())
    runner.check_node("other", node_params(), facts())  # its errors name the node
    wired = SubmitFacts(frozenset({"prompt", "image"}), lambda: {"image": (64, 64)}, {})
    runner.check_node("z", node_params(strength=0.5), wired)
    assert len(checks) == 5
    runner.check_node("z", node_params(seed=99), facts())  # the first again: kept
    assert len(checks) == 5


def test_a_model_file_changed_on_disk_is_checked_again(
    rig: FamilyRig, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(source_module, "IDENTITY_TTL_S", 0.0)  # a replaced file is seen at once
    runner = rig.node()
    checks = count_calls(monkeypatch, rig.family, "check")
    before = runner.check_node("z", node_params(), facts()).identity()
    model = root / "diffusion_models" / MODEL
    bump(model)
    again = runner.check_node("z", node_params(seed=2), facts())
    assert len(checks) == 2
    assert again.identity() != before  # the run keys its cache on the new file
    model.unlink()
    with pytest.raises(ModelMissing, match="diffusion model"):  # never the kept stack
        runner.check_node("z", node_params(seed=3), facts())


def test_a_lora_file_replaced_is_checked_again(
    rig: FamilyRig, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = rig.node()
    picker = LoraPicker(Families([rig.family]), rig.catalog)
    name = sorted(p.name for p in (root / "loras").iterdir())[0]

    def lora() -> LoraHandle:  # what the `input/lora` wired in prepares at each submit
        return picker.pick({"name": name, "strength": 1.0})

    checks = count_calls(monkeypatch, rig.family, "check")
    stale = lora()
    runner.check_node("z", node_params(), facts(loras=[stale]))
    runner.check_node("z", node_params(seed=2), facts(loras=[lora()]))
    assert len(checks) == 1
    bump(root / "loras" / name)
    replaced = lora()
    assert replaced != stale  # its handle names the new file
    runner.check_node("z", node_params(seed=3), facts(loras=[replaced]))
    assert len(checks) == 2
    # Even a handle that did not say so: the catalog's files changed since it was kept.
    bump(root / "loras" / name)
    runner.check_node("z", node_params(seed=4), facts(loras=[replaced]))
    assert len(checks) == 3


@pytest.mark.parametrize("where", ["outside the models folder", "in no category of it"])
def test_a_file_the_catalog_does_not_list_changed_is_checked_again(
    root: Path,
    sampler: StepLoopSampler,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    where: str,
) -> None:
    monkeypatch.setattr(source_module, "IDENTITY_TTL_S", 0.0)  # a replaced file is seen at once
    folder = tmp_path / "elsewhere" if where.startswith("outside") else root / "elsewhere"
    outside = folder / "vae.safetensors"
    outside.parent.mkdir()
    shutil.move(next((root / "vae").iterdir()), outside)
    for rig in rig_on(root, sampler, env={"INLINE_ZIMAGE_VAE": str(outside)}):
        runner = rig.node()
        checks = count_calls(monkeypatch, rig.family, "check")
        first = runner.check_node("z", node_params(), facts())
        assert first.get("vae") is not None and first.require("vae").path == outside
        runner.check_node("z", node_params(seed=2), facts())
        assert len(checks) == 1
        bump(outside)  # not in the catalog's fingerprint: its identity says so
        runner.check_node("z", node_params(seed=3), facts())
        assert len(checks) == 2


def test_a_registry_change_is_checked_again(
    rig: FamilyRig, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = rig.node()
    checks = count_calls(monkeypatch, rig.family, "check")
    runner.check_node("z", node_params(), facts(generation=4))
    runner.check_node("z", node_params(seed=2), facts(generation=4))
    runner.check_node("z", node_params(seed=3), facts(generation=5))
    assert len(checks) == 2


def test_a_refusal_is_never_kept(rig: FamilyRig, monkeypatch: pytest.MonkeyPatch) -> None:
    runner = rig.node()
    checks = count_calls(monkeypatch, rig.family, "check")
    unguided = node_params(sampler="euler_cfg_pp", guidance=0.0)
    for seed in (1, 2):
        with pytest.raises(InvalidRequest, match="CFG\\+\\+"):
            runner.check_node("z", {**unguided, "seed": seed}, facts())
    assert len(checks) == 2 and runner.kept_checks() == 0


def test_kept_checks_are_bounded(rig: FamilyRig, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(family_node, "CHECKS_KEPT", 3)
    runner = rig.node()
    for steps in range(1, 7):
        runner.check_node("z", node_params(steps=steps), facts())
    assert runner.kept_checks() == 3
    checks = count_calls(monkeypatch, rig.family, "check")
    runner.check_node("z", node_params(steps=6, seed=9), facts())  # the newest: still kept
    runner.check_node("z", node_params(steps=1, seed=9), facts())  # the oldest: pushed out
    assert len(checks) == 1


def test_the_kept_files_reach_the_run(rig: FamilyRig) -> None:
    """What a kept check returns is the run's `prepared`: the same files the first one found."""
    runner = rig.node()
    first = runner.check_node("z", node_params(), facts())
    assert isinstance(first, Sources) and first == rig.sources()
    assert runner.check_node("z", node_params(seed=5), facts()) is first
