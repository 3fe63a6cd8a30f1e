"""`kill -9` one of several servers sharing one PostgreSQL store every few seconds, under clients
submitting to whichever server answers, and check what the fleet did. Shared by the fleet crash
test, the fleet renders test (kit Z-Image renders: real compute) and the bench (bench/fleet.py).

Clients submit slow runs with clientRunIds to a random live server; a POST a kill cut off is sent
again, same clientRunId and body, to another server until one answers (as a real client would).
Every few seconds a random live server is killed with SIGKILL and restarted while the load goes on
(under a new server id: what it held must be taken over by the others once their leases expire),
`kills` times, with at least one server up at every moment.

Then every accepted run must finish, and the checks are those of one server's crash test
(`verify_store`: nothing lost, nothing doubled, each take intact and written once), plus the
event history's own account of who ran what: per run, each attempt on one server, attempts in
order, never interleaved (no run executed on two servers at once), begun by its claim and the
last one ending it.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
from PIL import Image

from inline_core.config import Config
from tests.hardening.crash_harness import Totals, accepted_run, slow_take_matches, verify_store
from tests.server.server_support import LiveServer, slow_graph, wait_until
from tests.server.store_support import query

TERMINAL = ("run_done", "error", "cancelled")


@dataclass
class Kill:
    server: str  # the id it had (a restart gives it a new one)
    at_s: float  # since the load began
    held: int  # runs the killed server held when it died
    restart_s: float = 0.0


@dataclass
class FleetTotals:
    store: Totals
    runs: int
    attempts: dict[int, int]  # attempts a run took -> how many runs took that many
    taken_over: int  # runs whose last attempt was not on the server of their first
    events: int


def slow_body(crash: FleetCrash) -> dict[str, Any]:
    """A `test/slow` run of a random length (the seed drawn by the server)."""
    steps = crash.rng.randint(*crash.steps)
    return {"graph": slow_graph(steps=steps, delay=crash.delay_s, seed=-1), "target": "s"}


def render_body(crash: FleetCrash, size: int = 64, steps: int = 4) -> dict[str, Any]:
    """A kit Z-Image render (the `inline-core kit` models; the server draws the seed)."""
    prompt = f"a fleet render {crash.rng.randint(0, 10**6)}"
    params = {"width": size, "height": size, "steps": steps, "seed": -1}
    return {
        "graph": {
            "schemaVersion": 1,
            "nodes": [
                {"id": "p", "type": "input/text", "params": {"text": prompt}},
                {
                    "id": "z",
                    "type": "alibaba/z-image-turbo",
                    "params": params,
                    "inputs": {"prompt": {"from": "p", "output": "text"}},
                },
            ],
        },
        "target": "z",
    }


def render_matches(graph: dict[str, Any], image: Image.Image) -> bool:
    params = graph["nodes"][1]["params"]
    return image.size == (params["width"], params["height"]) and params["seed"] >= 0


def executions(config: Config, run_ids: list[str]) -> dict[str, list[str]]:
    """Each run's servers, in the order their claims started it."""
    started = query(
        config, "SELECT run_id, server_id FROM events WHERE type = 'run_started' ORDER BY seq"
    )
    wanted = set(run_ids)
    out: dict[str, list[str]] = {}
    for run_id, server_id in started:
        if run_id in wanted:
            out.setdefault(run_id, []).append(server_id)
    return out


@dataclass
class FleetCrash:
    servers: Sequence[LiveServer]
    rng: random.Random
    clients: int = 8
    steps: tuple[int, int] = (10, 40)
    delay_s: float = 0.01
    pause_s: tuple[float, float] = (0.05, 0.2)  # between a client's submissions
    kill_every_s: tuple[float, float] = (1.5, 3.0)
    body: Callable[[FleetCrash], dict[str, Any]] = slow_body  # a run to submit (no clientRunId)
    runs_per_client: int | None = None  # None: submit until the kills are done
    accepted: dict[str, str] = field(default_factory=dict[str, str])  # clientRunId -> runId
    kills: list[Kill] = field(default_factory=list[Kill])
    answers: dict[int, int] = field(default_factory=dict[int, int])  # HTTP status -> count
    _down: set[int] = field(default_factory=set[int])  # servers being killed or restarted
    _failed_restarts: list[BaseException] = field(default_factory=list[BaseException])
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _began: float = 0.0

    def _up(self) -> list[LiveServer]:
        with self._lock:
            return [s for i, s in enumerate(self.servers) if i not in self._down]

    def submit(self, body: dict[str, Any]) -> None:
        """POST until some server answers with the run (trying another after a cut-off)."""
        while True:
            up = self._up()
            server = self.rng.choice(up) if up else self.servers[0]
            try:
                response = httpx.post(server.base + "/v1/runs", json=body, timeout=30)
            except httpx.HTTPError:
                time.sleep(0.02)  # killed under us: accepted or not, the retry will say
                continue
            with self._lock:
                self.answers[response.status_code] = self.answers.get(response.status_code, 0) + 1
            run_id = accepted_run(response)
            if run_id is None:
                continue
            with self._lock:
                self.accepted[body["clientRunId"]] = run_id
            return

    def _client(self, name: str, stop: threading.Event) -> None:
        n = 0
        while not stop.is_set() and (self.runs_per_client is None or n < self.runs_per_client):
            n += 1
            self.submit({**self.body(self), "clientRunId": f"{name}-{n}"})
            stop.wait(self.rng.uniform(*self.pause_s))

    def _held_by(self, server: LiveServer) -> int:
        try:
            health = httpx.get(server.base + "/v1/health", timeout=5).json()
        except httpx.HTTPError:
            return 0
        return len(health.get("leases", []))

    def run(self, kills: int) -> None:
        """Load the fleet and kill a server `kills` times (each restarted while the load goes
        on; one at least is always up), then stop the load."""
        stop = threading.Event()
        self._began = time.perf_counter()
        clients = [
            threading.Thread(target=self._client, args=(f"c{i}", stop), daemon=True)
            for i in range(self.clients)
        ]
        restarts: list[threading.Thread] = []
        for client in clients:
            client.start()
        try:
            for _ in range(kills):
                time.sleep(self.rng.uniform(*self.kill_every_s))
                index = self._next_victim()
                restarts.append(self._kill_and_restart(index))
            for restart in restarts:
                restart.join(timeout=120)
        finally:
            stop.set()
            for client in clients:
                client.join(timeout=60)

    def _next_victim(self) -> int:
        """A server that is up, once another one is up too."""
        while True:
            with self._lock:
                # A server whose restart failed stays down: once two cannot be up, fail now
                # rather than wait for them until the test's timeout.
                failed = len(self._failed_restarts)
                if failed and len(self.servers) - failed < 2:
                    error = self._failed_restarts[0]
                    raise AssertionError(
                        f"{failed} killed servers did not start again: {error}"
                    ) from error
                up = [i for i in range(len(self.servers)) if i not in self._down]
                if len(up) >= 2:
                    index = self.rng.choice(up)
                    self._down.add(index)
                    return index
            time.sleep(0.05)

    def _kill_and_restart(self, index: int) -> threading.Thread:
        server = self.servers[index]
        held = self._held_by(server)
        server.kill9()
        kill = Kill(server.env["INLINE_SERVER_ID"], time.perf_counter() - self._began, held)
        self.kills.append(kill)
        # A new id on restart: what it held is left for the others to take over.
        server.env["INLINE_SERVER_ID"] = f"{server.name}-{len(self.kills)}"

        def restart() -> None:
            started = time.perf_counter()
            try:
                server.start()
            except BaseException as exc:
                with self._lock:
                    self._failed_restarts.append(exc)
                raise
            kill.restart_s = time.perf_counter() - started
            with self._lock:
                self._down.discard(index)

        thread = threading.Thread(target=restart, daemon=True)
        thread.start()
        return thread

    def wait_all_finished(self, timeout: float = 180.0) -> None:
        config = self.servers[0].store_config

        def drained() -> bool | None:
            [(left,)] = query(
                config, "SELECT COUNT(*) FROM runs WHERE status IN ('queued', 'running')"
            )
            return True if left == 0 else None

        wait_until(drained, "every accepted run to finish", timeout=timeout, interval=0.2)

    def verify(
        self, matches: Callable[[dict[str, Any], Image.Image], bool] = slow_take_matches
    ) -> FleetTotals:
        config = self.servers[0].store_config
        takes = self.servers[0].data_dir / "takes"
        store = verify_store(config, takes, dict(self.accepted), matches)
        return check_history(config, store, list(self.accepted.values()))


def check_history(config: Config, store: Totals, run_ids: list[str]) -> FleetTotals:
    """Check every run's history (`check_one_server_at_a_time`) and count its attempts."""
    history = query(
        config,
        "SELECT run_id, seq, server_id, attempt, type, created_at FROM events ORDER BY seq",
    )
    per_run: dict[str, list[tuple[int, str, int, str, float]]] = {}
    for run_id, seq, server_id, attempt, kind, created_at in history:
        per_run.setdefault(run_id, []).append((seq, server_id, attempt, kind, created_at))
    attempts: dict[int, int] = {}
    taken_over = 0
    for run_id in run_ids:
        events = per_run[run_id]
        check_one_server_at_a_time(run_id, events)
        last = events[-1][2]
        attempts[last] = attempts.get(last, 0) + 1
        taken_over += events[0][1] != events[-1][1]
    return FleetTotals(store, len(run_ids), attempts, taken_over, len(history))


def check_one_server_at_a_time(run_id: str, events: list[tuple[int, str, int, str, float]]) -> None:
    """From the run's history (seq order): every execution (from one run_started, its claim, to
    the next) ran on one server and ended before the next one began, in the order of the
    database's clock as well as of the history; attempts never go back; the last execution
    ended the run. Executions are told apart by their run_started, not by their attempt number:
    a run given back unsure of its lease (a late heartbeat under load) is refunded its attempt,
    so its next execution, on any server, carries the same number."""
    attempts = [attempt for _seq, _server, attempt, _kind, _at in events]
    assert attempts == sorted(attempts), f"{run_id}: attempts interleave: {attempts}"
    executions: list[list[tuple[str, int, float]]] = []
    for _seq, server, attempt, kind, at in events:
        if kind == "run_started":
            executions.append([])
        assert executions, f"{run_id}: its history began with {kind}"
        execution = executions[-1]
        if execution:
            assert execution[0][0] == server, (
                f"{run_id}: attempt {attempt} on two servers ({execution[0][0]}, {server})"
            )
            assert execution[0][1] == attempt, f"{run_id}: one execution, two attempts"
        execution.append((server, attempt, at))
    for earlier, later in zip(executions, executions[1:], strict=False):
        assert earlier[-1][2] <= later[0][2], f"{run_id}: executions overlap"
    kinds = [kind for _seq, _server, _attempt, kind, _at in events]
    assert kinds[-1] in TERMINAL and sum(k in TERMINAL for k in kinds) == 1, f"{run_id}: {kinds}"
