"""A run's fraction weighs its nodes by their work: a text input next to nothing, a sampling
node by its steps. Before, each node counted the same, so a run whose prompt was done stood past
half way before its sampler's first step."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from server_support import (
    post_run,
    run_state,
    running_server,
    slow_graph,
    wait_finished,
    wait_until,
)


def test_a_text_input_does_not_count_as_half_the_run(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    with running_server(tmp_path) as live:
        graph = slow_graph(steps=2, node_type="test/gated", gate=str(gate))
        response = post_run(live, graph, "s")
        assert response.status_code == 201, response.text
        run_id = str(response.json()["runId"])

        def at_first_step() -> dict[str, Any] | None:
            state = run_state(live, run_id)
            return state if state["nodes"]["s"].get("step") == 1 else None

        state = wait_until(at_first_step, "the gated node's first step")
        assert state["nodes"]["p"]["state"] == "done"  # the prompt: done, and next to no work
        sampler = state["nodes"]["s"]["fraction"]
        assert 0 < sampler < 1
        assert abs(state["fraction"] - sampler) < 0.01, state  # the run is where its sampler is
        gate.touch()
        done = wait_finished(live, run_id)
    assert done["status"] == "done" and done["fraction"] == 1.0
