"""LoRAs on Wan 2.2 A14B's pair: each expert takes its own stack (an `input/lora`'s `expert`:
both, high or low; the lightx2v LoRAs come one file per expert). A render equals diffusers'
`WanPipeline` with both transformers after `load_lora_weights` into `transformer` and, with
`load_into_transformer_2=True`, into `transformer_2`, each model's adapters set at their
strengths; requests with different stacks share forwards on each expert and render what each
renders alone; an expert picked on a one-model stack, or a LoRA trained for another size of Wan,
is a 422 at submit naming the param or the file."""

from __future__ import annotations

import dataclasses
from collections.abc import Generator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from fastapi.testclient import TestClient
from test_wan_batching import assert_same, solo_and_together
from test_wan_experts import FOLDER, HIGH, MAX_DIFFERING, STEPS, TOLERANCE, reference
from test_wan_lora_server import with_loras
from test_wan_server import submit, wan_graph
from wan_harness import max_diff, render, take_frames, wan_rig

from inline_core.contract.handles import LoraHandle
from inline_core.diffusion.libs import save_safetensors
from inline_core.families.wan.kit import WanKit
from inline_core.runtime.video import decode_apng
from inline_core.sampling.loop import StepLoopSampler
from tests.families.zimage.lora_harness import picks

# (kit LoRA key, expert, strength): a pair's stack.
ExpertStack = Sequence[tuple[str, str, float]]


def handles(rig: Any, kit: WanKit, stack: ExpertStack) -> list[LoraHandle]:
    picked = picks(rig, kit, [(key, strength) for key, _expert, strength in stack])
    return [dataclasses.replace(h, expert=e) for h, (_k, e, _s) in zip(picked, stack, strict=True)]


@contextmanager
def reference_with_experts(pipe: Any, kit: WanKit, stack: ExpertStack) -> Generator[Any]:
    """`pipe` with each LoRA loaded into the transformers its expert picks, each transformer's
    adapters set at their strengths; unloaded after."""
    names: dict[str, list[tuple[str, float]]] = {"transformer": [], "transformer_2": []}
    for i, (key, expert, strength) in enumerate(stack):
        path = str(kit.loras[key])
        if expert in ("both", "high"):
            pipe.load_lora_weights(path, adapter_name=f"high{i}")
            names["transformer"].append((f"high{i}", strength))
        if expert in ("both", "low"):
            pipe.load_lora_weights(path, adapter_name=f"low{i}", load_into_transformer_2=True)
            names["transformer_2"].append((f"low{i}", strength))
    for part, adapters in names.items():
        if adapters:
            getattr(pipe, part).set_adapters([n for n, _s in adapters], [s for _n, s in adapters])
    try:
        yield pipe
    finally:
        pipe.unload_lora_weights()


@pytest.mark.parametrize(
    "stack",
    [
        pytest.param([("a", "high", 1.0), ("b", "low", 1.5)], id="one-per-expert"),
        pytest.param([("a-comfy", "both", 0.8), ("b", "low", 1.2)], id="both-and-low"),
    ],
)
def test_per_expert_loras_match_wan_pipeline_loaded_per_transformer(
    wan_kit: WanKit,
    wan_sampler: StepLoopSampler,
    a14b_reference: Any,
    tmp_path: Path,
    stack: ExpertStack,
) -> None:
    rig = wan_rig(wan_kit.root, wan_sampler)
    loras = handles(rig, wan_kit, stack)
    result = render(rig, tmp_path, model=FOLDER, steps=STEPS, guidance=1.0, loras=loras)
    ours = take_frames(result)
    with reference_with_experts(a14b_reference, wan_kit, stack) as pipe:
        ref = reference(pipe, steps=STEPS, guidance=1.0)
    assert max_diff(ours, ref) <= TOLERANCE
    assert float((ours != ref).mean()) <= MAX_DIFFERING
    plain = reference(a14b_reference, steps=STEPS, guidance=1.0)
    assert max_diff(ours, plain) > 10 * TOLERANCE  # the LoRAs changed the frames
    (take,) = result.takes
    assert take.params["loras"] == [
        {"name": wan_kit.loras[k].name, "strength": s, "expert": e} for k, e, s in stack
    ]


def test_a_lora_on_one_expert_renders_otherwise_than_on_the_other(
    wan_kit: WanKit, wan_sampler: StepLoopSampler, tmp_path: Path
) -> None:
    """The same LoRA on the low-noise expert (its last step) and on the high-noise one (the three
    before) changes the frames, each otherwise: each expert applies its own stack."""
    rig = wan_rig(wan_kit.root, wan_sampler)
    runs = {
        expert: take_frames(
            render(
                rig,
                tmp_path,
                model=HIGH,
                steps=STEPS,
                guidance=1.0,
                loras=handles(rig, wan_kit, [("b", expert, 1.5)]) if expert else (),
            )
        )
        for expert in ("", "low", "high")
    }
    assert max_diff(runs["low"], runs[""]) > 0
    assert max_diff(runs["high"], runs[""]) > 0
    assert max_diff(runs["high"], runs["low"]) > 0


def test_pair_requests_with_different_expert_stacks_share_forwards_and_match_alone(
    wan_kit: WanKit,
) -> None:
    stacks: list[ExpertStack] = [
        [],
        [("a", "high", 1.0)],
        [("b", "low", 1.0)],
        [("a", "both", 0.5), ("b", "low", 1.5)],
    ]
    sampler = StepLoopSampler()
    try:
        rig = wan_rig(wan_kit.root, sampler)
        pipeline = rig.pipeline(HIGH)
        requests: list[dict[str, Any]] = []
        for i, stack in enumerate(stacks):
            picked = handles(rig, wan_kit, stack)
            high = tuple(h.use for h in picked if h.expert in ("both", "high"))
            low = tuple(h.use for h in picked if h.expert in ("both", "low"))
            requests.append(
                {
                    "prompt": f"render {i}",
                    "seed": i,
                    "steps": STEPS,
                    "guidance": 1.0,
                    "width": 48,
                    "height": 32,
                    "frames": 9,
                    "format": "png",
                    "boundary_ratio": 0.875,
                    "switch_step": 2,
                    "loras": high,
                    "loras_2": low,
                }
            )
        solo, together, stats = solo_and_together(sampler, pipeline, requests)
    finally:
        sampler.close()
    # Every forward held all four rows: two on the high-noise expert, two on the low-noise one.
    assert stats["batchedForwards"] == STEPS and stats["meanBatch"] > 1.0, stats
    assert_same(solo, together)
    plain = solo[0].astype(np.int16)
    for i in range(1, len(stacks)):  # every stack changed its frames: no row got another's
        assert int(np.abs(solo[i].astype(np.int16) - plain).max()) > 0, stacks[i]


def expert_graph(kit: WanKit, model: str, stack: ExpertStack) -> dict[str, Any]:
    graph = with_loras(
        wan_graph(model=model, steps=STEPS, format="png"),
        [(kit.loras[key].name, strength) for key, _e, strength in stack],
    )
    for i, (_key, expert, _s) in enumerate(stack):
        node = next(n for n in graph["nodes"] if n["id"] == f"l{i}")
        node["params"]["expert"] = expert
    return graph


def test_the_server_renders_a_pair_with_per_expert_loras(
    client: TestClient, wan_kit: WanKit, wan_sampler: StepLoopSampler, tmp_path: Path
) -> None:
    stack: ExpertStack = [("a-comfy", "high", 1.0), ("b", "low", 1.5)]
    state = submit(client, expert_graph(wan_kit, HIGH, stack))
    assert state["status"] == "done", state
    (take,) = state["takes"]
    ours = decode_apng(client.get(take["uri"]).content).astype(np.int16)
    rig = wan_rig(wan_kit.root, wan_sampler)
    direct = take_frames(
        render(rig, tmp_path, model=HIGH, steps=STEPS, loras=handles(rig, wan_kit, stack))
    )
    assert max_diff(ours, direct) == 0


def test_bad_expert_loras_are_422_at_submit(wan_kit: WanKit, tmp_path: Path) -> None:
    from inline_core.config import Config
    from inline_core.server.app import create_app

    # A LoRA on layers every Wan has, trained on a model twice as wide (another size of Wan).
    wide = wan_kit.root / "loras" / "wan_wide_test.safetensors"
    save_safetensors(
        {
            "diffusion_model.blocks.0.self_attn.q.lora_down.weight": torch.zeros(2, 64),
            "diffusion_model.blocks.0.self_attn.q.lora_up.weight": torch.zeros(64, 2),
        },
        wide,
    )
    one_model = expert_graph(wan_kit, "wan2.1_t2v_tiny_fp32.safetensors", [("a", "low", 1.0)])
    wrong_size = expert_graph(wan_kit, HIGH, [("a", "high", 1.0)])
    wrong_size["nodes"][0]["params"]["name"] = wide.name
    cases = [
        (one_model, "param 'expert' is 'low', which picks one model of a two-model stack"),
        (wrong_size, f"loras/{wide.name} adapts 'blocks.0.attn1.to_q' as 64 -> 64 features"),
    ]
    config = Config(
        models_dir=wan_kit.root, data_dir=tmp_path / "data", profile="cpu", dtype="float32"
    )
    try:
        with TestClient(create_app(config)) as client:
            for graph, expected in cases:
                response = client.post("/v1/runs", json={"graph": graph, "target": "w"})
                assert response.status_code == 422, response.text
                error = response.json()["error"]
                assert error["nodeId"] == "w" and expected in error["message"], error
                assert "32 -> 32" in error["message"] or "expert" in expected
            assert client.get("/v1/runs").json()["runs"] == []  # nothing was queued
    finally:
        wide.unlink()
