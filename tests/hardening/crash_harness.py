"""`kill -9` a live server at random moments under concurrent submissions, restart it, and check
that nothing was lost, duplicated or corrupted. Shared by the crash test and the crash bench
(bench/crash_restarts.py).

Each cycle: clients submit slow runs (each with a clientRunId) until the server is killed at a
random moment; a POST the kill cut off is retried after the restart with the same clientRunId and
body, as a real client would; then every accepted run must reach a terminal state and the store
must hold exactly the accepted runs, one take each, whose bytes match their recorded hash, in a
database that passes `PRAGMA integrity_check` (SQLite). `verify_store` also serves the crash test
of several servers sharing PostgreSQL (fleet_crash.py).
"""

from __future__ import annotations

import hashlib
import io
import json
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from PIL import Image

from inline_core.config import Config
from tests.server.server_support import LiveServer, slow_graph, wait_until
from tests.server.store_support import query

FINISHED = ("done", "error", "cancelled")


def expected_colour(seed: int) -> tuple[int, int, int]:
    """The colour `test/slow` paints for `seed` (see tests/server/server_nodes.py)."""
    return seed % 251, (seed // 251) % 251, (seed // 63001) % 251


def accepted_run(response: httpx.Response) -> str | None:
    """The run a POST /v1/runs answer names, or None (after a pause) if the server said to come
    back later (429, 503); any other answer fails the test."""
    if response.status_code in (429, 503):
        time.sleep(0.05)
        return None
    if response.status_code not in (200, 201):
        raise AssertionError(f"unexpected answer {response.status_code}: {response.text}")
    return str(response.json()["runId"])


@dataclass
class Cycle:
    kill_after_s: float
    accepted: int = 0  # POSTs answered 200/201 before the kill
    cut_off: int = 0  # POSTs the kill left unanswered
    cut_off_committed: int = 0  # ... of which the retry found already stored (200)
    unfinished_at_kill: int = 0  # runs queued or running in the store when the kill landed
    running_at_kill: int = 0
    restart_s: float = 0.0  # spawn -> first /v1/health answer
    drain_s: float = 0.0  # restart -> every accepted run finished


@dataclass
class Totals:
    runs: int = 0
    takes: int = 0
    statuses: dict[str, int] = field(default_factory=dict[str, int])
    integrity: str = ""
    temp_files: int = 0


@dataclass
class CrashHarness:
    server: LiveServer
    rng: random.Random
    clients: int = 4
    steps: tuple[int, int] = (5, 25)
    delay_s: float = 0.004
    kill_window_s: tuple[float, float] = (0.05, 0.8)
    accepted: dict[str, str] = field(default_factory=dict[str, str])  # clientRunId -> runId
    cycles: list[Cycle] = field(default_factory=list[Cycle])
    finished: set[str] = field(default_factory=set[str])
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # ---- submitting --------------------------------------------------------------------------

    def _body(self, client_run_id: str, steps: int) -> dict[str, Any]:
        graph = slow_graph(steps=steps, delay=self.delay_s, seed=-1)  # the server draws the seed
        return {"graph": graph, "target": "s", "clientRunId": client_run_id}

    def _post(self, body: dict[str, Any]) -> httpx.Response:
        return httpx.post(self.server.base + "/v1/runs", json=body, timeout=30)

    def _submitter(
        self, name: str, steps: list[int], stop: threading.Event, cut: list[dict[str, Any]]
    ) -> None:
        for n, step_count in enumerate(steps):
            if stop.is_set():
                return
            body = self._body(f"{name}-{n}", step_count)
            try:
                response = self._post(body)
            except httpx.HTTPError:
                with self._lock:
                    cut.append(body)  # the kill cut it off: accepted or not, we cannot know
                return
            run_id = accepted_run(response)
            if run_id is None:
                continue
            with self._lock:
                self.accepted[body["clientRunId"]] = run_id

    def kill_at_a_random_moment(self, index: int) -> Cycle:
        cycle = Cycle(kill_after_s=self.rng.uniform(*self.kill_window_s))
        stop = threading.Event()
        cut: list[dict[str, Any]] = []
        before = len(self.accepted)
        threads = [
            threading.Thread(
                target=self._submitter,
                args=(
                    f"k{index}-c{c}",
                    [self.rng.randint(*self.steps) for _ in range(400)],
                    stop,
                    cut,
                ),
            )
            for c in range(self.clients)
        ]
        for t in threads:
            t.start()
        time.sleep(cycle.kill_after_s)
        self.server.kill9()
        stop.set()
        for t in threads:
            t.join()
        cycle.accepted = len(self.accepted) - before
        cycle.cut_off = len(cut)
        counts = self._unfinished_counts()
        cycle.unfinished_at_kill = counts[0]
        cycle.running_at_kill = counts[1]

        started = time.perf_counter()
        self.server.start()
        cycle.restart_s = time.perf_counter() - started
        for body in cut:  # the client retries what it never heard back about
            response = self._post(body)
            assert response.status_code in (200, 201), response.text
            cycle.cut_off_committed += response.status_code == 200
            self.accepted[body["clientRunId"]] = response.json()["runId"]
        self.wait_all_finished()
        cycle.drain_s = time.perf_counter() - started
        self.cycles.append(cycle)
        return cycle

    # ---- checking ----------------------------------------------------------------------------

    def _query(self, sql: str) -> list[tuple[Any, ...]]:
        return query(self.server.store_config, sql)

    def _unfinished_counts(self) -> tuple[int, int]:
        [(unfinished, running)] = self._query(
            "SELECT COUNT(*), COALESCE(SUM(CASE WHEN status = 'running' THEN 1 ELSE 0 END), 0) "
            "FROM runs WHERE status IN ('queued', 'running')"
        )
        return int(unfinished), int(running)

    def wait_all_finished(self) -> None:
        """Every accepted run finished (runs seen finished before stay finished: a terminal state
        is final, which `verify` checks in the store)."""
        pending = set(self.accepted.values()) - self.finished

        def probe() -> bool | None:
            with httpx.Client(base_url=self.server.base, timeout=30) as client:
                for run_id in sorted(pending):
                    response = client.get(f"/v1/runs/{run_id}")
                    assert response.status_code == 200, response.text
                    if response.json()["status"] not in FINISHED:
                        return None
                    pending.discard(run_id)
                    self.finished.add(run_id)
            return True

        wait_until(probe, "every accepted run to finish", timeout=120, interval=0.05)

        def idle() -> bool | None:
            counts = httpx.get(self.server.base + "/v1/health", timeout=30).json()["runs"]
            return True if counts == {"queued": 0, "running": 0} else None

        wait_until(idle, "the server to be idle", timeout=120)

    def verify(self) -> Totals:
        return verify_store(self.server.store_config, self.server.data_dir / "takes", self.accepted)


def slow_take_matches(graph: dict[str, Any], image: Image.Image) -> bool:
    """A `test/slow` take's colour is a function of the seed stored at submit."""
    seed = int(graph["nodes"][1]["params"]["seed"])
    return image.getpixel((0, 0)) == expected_colour(seed)


def verify_store(
    config: Config,
    takes_dir: Path,
    accepted: dict[str, str],
    matches: Callable[[dict[str, Any], Image.Image], bool] = slow_take_matches,
) -> Totals:
    """Everything the store holds is what the clients were told, intact and not doubled:
    exactly the accepted runs (clientRunId -> runId), all done, one take each whose bytes match
    their hash and the stored graph (`matches`), and no take file that is not a recorded take."""
    totals = Totals()
    if config.database_url is None:
        totals.integrity = "\n".join(str(r[0]) for r in query(config, "PRAGMA integrity_check"))
        assert totals.integrity == "ok", totals.integrity
    else:
        totals.integrity = "ok"  # PostgreSQL checks its own pages; the rows are checked below
    runs = query(config, "SELECT id, client_run_id, status, graph FROM runs")
    takes = query(config, "SELECT id, run_id, path, hash FROM takes")
    # Exactly the accepted runs: none lost, none invented, one per clientRunId.
    stored = {client_run_id: run_id for run_id, client_run_id, _s, _g in runs}
    assert stored == accepted, "the store and the clients disagree about the runs"
    for _id, _cid, status, _g in runs:
        totals.statuses[status] = totals.statuses.get(status, 0) + 1
    assert set(totals.statuses) <= {"done"}, totals.statuses
    # One take per run, its bytes matching its hash and the seed recorded at submit.
    per_run: dict[str, list[tuple[str, str, str]]] = {}
    for take_id, run_id, path, digest in takes:
        per_run.setdefault(run_id, []).append((take_id, path, digest))
    for run_id, _cid, _s, graph_text in runs:
        [(_take_id, path, digest)] = per_run[run_id]
        data = (takes_dir / Path(path).name).read_bytes()
        assert digest == "sha256-" + hashlib.sha256(data).hexdigest(), run_id
        with Image.open(io.BytesIO(data)) as image:
            assert matches(json.loads(graph_text), image), run_id
    # Every take file on disk is a recorded take (nothing written twice under two names).
    files = sorted(p.stem for p in takes_dir.iterdir() if not p.name.startswith("."))
    assert files == sorted(t[0] for t in takes)
    totals.temp_files = sum(1 for p in takes_dir.iterdir() if p.name.startswith(".tmp-"))
    totals.runs, totals.takes = len(runs), len(takes)
    return totals
