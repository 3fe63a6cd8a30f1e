"""Every way a pack node can fail, through one real server: it raises, segfaults, exits, hangs
past its time limit, grows past its memory limit. Each fails its node with an error naming the
pack, the run ends in error with its earlier takes kept, other runs and packs go on, and the pack
starts a new worker on its next use."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from PIL import ImageOps

from tests.packs.pack_support import (
    chain_graph,
    finished,
    gradient,
    logged_failure,
    pack_failure,
    pack_server,
    packs_listing,
    run_state,
    run_to_end,
    start_run,
    take_image,
    upload_image,
)
from tests.server.server_support import LiveServer, wait_until


@pytest.fixture(scope="module")
def live(packs_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with pack_server(tmp_path_factory.mktemp("faults-server"), packs_home) as server:
        yield server


def slow_mask(live: LiveServer, value: int) -> bytes:
    state = run_to_end(live, chain_graph(None, ("faults/slow", {"steps": 2, "value": value})), "n1")
    assert state["status"] == "done", state
    return take_image(live, state["takes"][0]).tobytes()


def test_a_node_that_raises_fails_its_run_naming_the_pack(live: LiveServer) -> None:
    state = run_to_end(live, chain_graph(None, ("faults/fail", {})), "n1")
    message = pack_failure(state)
    assert state["error"]["code"] == "pack_failed" and state["error"]["nodeId"] == "n1"
    assert "pack 'faults' (1.0.0) node 'fail' raised ValueError" in message
    assert "failed on purpose" in message
    # Raising does not cost the worker: the next call runs on it.
    starts = packs_listing(live)["faults"]["workerStarts"]
    assert slow_mask(live, 3) == bytes([3]) * 4
    assert packs_listing(live)["faults"]["workerStarts"] == starts


def test_a_segfault_fails_the_node_keeps_earlier_takes_and_the_pack_restarts(
    live: LiveServer,
) -> None:
    source = gradient()
    asset = upload_image(live, source)
    graph = chain_graph(asset, ("pillow10/invert", {}), ("segv/crash", {}))
    state = run_to_end(live, graph, "n2")
    message = logged_failure(live, state)
    assert state["error"]["nodeId"] == "n2"
    assert "pack 'segv' (1.0.0) node 'crash' crashed (SIGSEGV)" in message
    assert "Segmentation fault" in message  # the worker's own last words, from its log
    [kept] = state["takes"]  # the node before the crash finished, and its take is kept
    assert kept["nodeId"] == "n1"
    assert take_image(live, kept).tobytes() == ImageOps.invert(source).tobytes()
    assert run_state(live, state["runId"])["status"] == "error"  # stored as such
    listing = packs_listing(live)["segv"]
    assert listing["status"] == "idle" and "SIGSEGV" in listing["lastError"]
    again = run_to_end(live, chain_graph(None, ("segv/crash", {})), "n1")
    assert "SIGSEGV" in pack_failure(again)
    assert packs_listing(live)["segv"]["workerStarts"] == listing["workerStarts"] + 1


def test_a_node_that_exits_fails_and_the_next_use_starts_a_new_worker(live: LiveServer) -> None:
    before = packs_listing(live)["faults"]["workerStarts"]
    state = run_to_end(live, chain_graph(None, ("faults/quit", {"status": 7})), "n1")
    assert "pack 'faults' (1.0.0) node 'quit' exited with status 7" in pack_failure(state)
    assert packs_listing(live)["faults"]["status"] == "idle"
    assert slow_mask(live, 5) == bytes([5]) * 4
    assert packs_listing(live)["faults"]["workerStarts"] == before + 1


def test_a_node_that_hangs_past_its_time_limit_is_ended(live: LiveServer) -> None:
    state = run_to_end(live, chain_graph(None, ("hang/forever", {})), "n1")
    assert "pack 'hang' (1.0.0) node 'forever' hung past its time limit of 3 s" in logged_failure(
        live, state
    )
    assert packs_listing(live)["hang"]["status"] == "idle"


def test_a_cancel_ends_a_hung_node_cancelled_not_at_its_time_limit(live: LiveServer) -> None:
    run_id = start_run(live, chain_graph(None, ("hang/forever", {})), "n1")

    def at_work() -> bool | None:
        state = run_state(live, run_id)
        return True if state["status"] == "running" and "n1" in state["nodes"] else None

    wait_until(at_work, "the hung node to start")
    assert httpx.delete(f"{live.base}/v1/runs/{run_id}", timeout=30).status_code == 200
    state = finished(live, run_id)
    # Its worker never answers the cancel: it is ended, and the run is cancelled, not failed
    # at its 3 s limit (which used to outlast the cancel's grace).
    assert state["status"] == "cancelled", state
    assert packs_listing(live)["hang"]["status"] == "idle"


def test_a_node_that_grows_past_its_memory_limit_is_ended(live: LiveServer) -> None:
    state = run_to_end(live, chain_graph(None, ("faults/hog", {})), "n1")
    message = logged_failure(live, state)
    assert "pack 'faults' (1.0.0) node 'hog' grew past its memory limit of 300 MB" in message
    assert slow_mask(live, 9) == bytes([9]) * 4


def test_other_runs_and_packs_go_on_while_a_pack_node_is_stuck(live: LiveServer) -> None:
    stuck = start_run(live, chain_graph(None, ("faults/stubborn", {})), "n1")

    def working() -> bool | None:
        node = run_state(live, stuck)["nodes"].get("n1", {})
        return True if node.get("fraction", 0) >= 0.5 else None  # it reported its progress

    wait_until(working, "the stubborn node to be at work")
    source = gradient()
    asset = upload_image(live, source)
    other = run_to_end(live, chain_graph(asset, ("pillow10/invert", {})), "n1")
    assert other["status"] == "done"
    assert take_image(live, other["takes"][0]).tobytes() == ImageOps.invert(source).tobytes()
    assert run_state(live, stuck)["status"] == "running"  # it never ends on its own
    assert httpx.delete(f"{live.base}/v1/runs/{stuck}", timeout=30).status_code == 200
    assert finished(live, stuck)["status"] == "cancelled"
