"""What a pack's worker can see: its own interpreter and environment, a scrubbed set of variables
(none of the server's), no file descriptor but its socket and its arena, its scratch
folder as working dir, home and temp dir, and its inputs inside that folder. And a worker that
speaks another protocol version is refused when it says hello."""

from __future__ import annotations

import json
from pathlib import Path

import psutil

from inline_core_sdk.version import PROTOCOL_VERSION
from tests.packs.pack_support import (
    chain_graph,
    gradient,
    install,
    mask_json,
    pack_failure,
    pack_server,
    run_state,
    run_to_end,
    start_run,
    upload_image,
)
from tests.server.server_support import LiveServer, wait_until

SECRET = "not-for-packs-8c1f"


def test_a_worker_sees_only_its_environment_scratch_and_inputs(
    packs_home: Path, tmp_path: Path
) -> None:
    env = {"INLINE_SERVER_SECRET": SECRET, "SOME_OTHER_SECRET": SECRET}
    with pack_server(tmp_path, packs_home, env) as live:
        asset = upload_image(live, gradient())
        state = run_to_end(live, chain_graph(asset, ("faults/facts", {})), "n1")
        assert state["status"] == "done", state
        facts = mask_json(live, state["takes"][0])
        assert live.proc is not None
        server_pid = live.proc.pid
    index = json.loads((packs_home / "index.json").read_text())
    env_dir = (packs_home / index["packs"]["faults"]["dir"] / "env").resolve()
    assert Path(facts["executable"]).parent.parent == env_dir  # the pack's own interpreter
    assert facts["pid"] != server_pid and facts["parent"] == server_pid  # a child, not a fork
    seen = facts["env"]
    assert SECRET not in json.dumps(seen)
    assert not [k for k in seen if k.startswith("INLINE_")]
    assert str(tmp_path) not in json.dumps(seen)  # not even where the server keeps its data
    scratch = Path(facts["cwd"])
    assert seen["HOME"] == seen["TMPDIR"] == str(scratch)
    assert seen["PATH"].split(":")[0] == str(Path(facts["executable"]).parent)
    assert Path(facts["scratch"]).parent == scratch  # the call's folder is inside it
    assert Path(facts["inputs"]["image"]).parent == Path(facts["scratch"])
    inherited = {fd: link for fd, link in facts["fds"].items() if fd not in ("0", "1", "2")}
    kinds = sorted(link.split(":")[0] for link in inherited.values() if link != "gone")
    assert kinds == ["/memfd", "socket"]  # its socket, and the arena made for its images
    assert [link for link in inherited.values() if link.startswith("/memfd:")] == [
        "/memfd:inline-pack-arena (deleted)"
    ]
    assert facts["fds"]["0"] == "/dev/null"


def test_a_worker_speaking_another_protocol_is_refused(tmp_path: Path) -> None:
    packs_dir = tmp_path / "packs"
    install(packs_dir, "segv")
    index = json.loads((packs_dir / "index.json").read_text())
    env_dir = packs_dir / index["packs"]["segv"]["dir"] / "env"
    [version_py] = env_dir.glob("lib/python*/site-packages/inline_core_sdk/version.py")
    # As a newer SDK would have it (a longer line: the cached bytecode's size check sees it).
    later = PROTOCOL_VERSION + 1
    newer = f"PROTOCOL_VERSION = {later}  # a later, incompatible protocol"
    version_py.write_text(
        version_py.read_text().replace(f"PROTOCOL_VERSION = {PROTOCOL_VERSION}", newer)
    )
    with pack_server(tmp_path / "server", packs_dir) as live:
        state = run_to_end(live, chain_graph(None, ("segv/crash", {})), "n1")
        assert f"speaks protocol {later}; this server speaks {PROTOCOL_VERSION}" in pack_failure(
            state
        )


def pack_workers(live: LiveServer) -> list[psutil.Process]:
    assert live.proc is not None
    found: list[psutil.Process] = []
    for child in psutil.Process(live.proc.pid).children(recursive=True):
        try:
            if "inline_core_sdk" in " ".join(child.cmdline()):
                found.append(child)
        except psutil.Error:
            continue
    return found


def test_a_worker_does_not_outlive_a_killed_server_and_its_scratch_goes_at_the_next_start(
    packs_home: Path, tmp_path: Path
) -> None:
    with pack_server(tmp_path, packs_home) as live:
        run_id = start_run(live, chain_graph(None, ("faults/stubborn", {})), "n1")

        def at_work() -> bool | None:
            node = run_state(live, run_id)["nodes"].get("n1", {})
            return True if node.get("fraction", 0) >= 0.5 else None

        wait_until(at_work, "the stubborn node to be at work")
        [worker] = pack_workers(live)
        scratch = Path(worker.cwd())
        live.kill9()
        # Its socket closes with the server: the worker leaves, busy node and all.
        wait_until(lambda: True if not worker.is_running() else None, "the worker to exit")
        # The killed server could not remove the worker's scratch folder (shared memory); the
        # next server to start sweeps it, since no live process holds its lock any more.
        assert scratch.is_dir()
        live.start()
        assert not scratch.exists()
