"""The run manager: validate -> store -> queue -> execute on worker threads -> fan out events.

Promises it keeps:
- A run is stored (durably) before `submit` returns, and validated before it is stored.
- Runs start in the order they were accepted, several at once (`config.run_workers`).
- Every run ends: any exception becomes an `error`, and the terminal state and takes are durable
  before any subscriber hears `run_done` / `error` / `cancelled`.
- A graceful shutdown puts running runs back in the queue (they resume on the next start); after a
  crash `RunStore.recover_on_start` does the same, within `config.max_retries`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import random
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import Any

from inline_core.config import Config
from inline_core.errors import (
    Busy,
    Cancelled,
    Conflict,
    InlineError,
    InvalidRequest,
    NotFound,
    Unavailable,
)
from inline_core.graph.executor import Executor
from inline_core.graph.registry import Registry
from inline_core.graph.runner import CatalogView
from inline_core.graph.schema import parse_graph
from inline_core.graph.validate import ValidatedGraph, validate_graph
from inline_core.runtime.context import ExecutionContext
from inline_core.runtime.progress import RunEvent
from inline_core.runtime.store import TakeStore
from inline_core.server import serialize
from inline_core.server.events import Subscriber, WireEvent
from inline_core.server.live_run import LiveRun
from inline_core.server.memory import HeapTrimmer
from inline_core.server.run_state import NewRun, RunRecord, RunStatus
from inline_core.server.run_store import RunStore, RunSummary
from inline_core.takes import Take

log = logging.getLogger(__name__)

SHUTDOWN = "shutdown"
MAX_CLIENT_RUN_ID = 200
MAX_TARGET = 128


def request_hash(graph_json: object, target: str) -> str:
    """The identity of a submission as the client sent it (before seeds are resolved)."""
    canonical = json.dumps(
        {"graph": graph_json, "target": target}, sort_keys=True, separators=(",", ":")
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


# Run ids need to be unique, not secret (GET /v1/runs lists them). They start with the time in
# milliseconds so new ids append to the store's index (few pages touched per commit), and end in
# 48 random bits from a PRNG seeded once from the OS (no syscall per submission).
_ids = random.Random(secrets.randbits(128))


def new_run_id() -> str:
    return f"run_{time.time_ns() // 1_000_000:012x}{_ids.getrandbits(48):012x}"


@dataclass(frozen=True)
class _Outcome:
    status: RunStatus | None  # None: interrupted by shutdown, goes back to the queue
    error: dict[str, Any] | None = None
    takes: tuple[Take, ...] = field(default_factory=tuple[Take, ...])


class RunManager:
    def __init__(
        self,
        config: Config,
        *,
        store: RunStore,
        registry: Registry,
        catalog: CatalogView,
        takes: TakeStore,
        executor: Executor,
        rng: random.Random | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self.registry = registry
        self.catalog = catalog
        self.takes = takes
        self.executor = executor
        self._rng = rng
        self._lock = threading.Lock()
        self._work = threading.Condition(self._lock)
        self._queue: deque[str] = deque()
        self._live: dict[str, LiveRun] = {}
        self._reserved = 0  # queue slots held by submissions not yet committed
        self._closing = False
        self._workers: list[threading.Thread] = []
        self.trimmer = HeapTrimmer()

    # ---- life cycle ----------------------------------------------------------------------------

    def start(self, on_recovered: Callable[[list[RunRecord]], object] | None = None) -> None:
        """Recover what the last process left behind, then start the workers. `on_recovered`
        sees the runs that will run again before any worker or submission can write a take
        (the start-up sweep of orphan take files runs there)."""
        recovered = self.store.recover_on_start(self.config.max_retries)
        if on_recovered is not None:
            on_recovered(recovered)
        for record in recovered:
            self._enqueue(record, None)
        for i in range(self.config.run_workers):
            worker = threading.Thread(target=self._worker_loop, name=f"run-worker-{i}", daemon=True)
            worker.start()
            self._workers.append(worker)

    def shutdown(self, timeout: float = 5.0) -> None:
        """Stop accepting, interrupt running runs at their next step and queue them again."""
        with self._work:
            if self._closing:
                return
            self._closing = True
            running = [r for r in self._live.values() if r.status == RunStatus.RUNNING]
            for run in running:
                run.token.cancel(SHUTDOWN)
            self._work.notify_all()
        deadline = time.monotonic() + timeout
        for run in running:
            run.finished.wait(max(0.0, deadline - time.monotonic()))
        for run in running:
            if not run.finished.is_set():  # stuck in a step that does not check its token
                log.warning(
                    "run %s did not stop in %.1f s; queued for the next start", run.id, timeout
                )
                try:
                    with self._lock:
                        nodes = run.reset_nodes()
                    self.store.requeue(run.id, nodes=nodes, refund_attempt=True)
                except Exception:
                    log.exception("could not queue run %s again", run.id)
        with self._lock:
            for run in self._live.values():
                for subscriber in run.subscribers:
                    subscriber.close()
                run.subscribers.clear()
        for worker in self._workers:
            worker.join(max(0.0, deadline - time.monotonic()) + 0.5)

    # ---- submit --------------------------------------------------------------------------------

    def _accept(
        self, graph_json: object, target: object, client_run_id: object
    ) -> Future[tuple[RunRecord, bool]]:
        if self._closing:
            raise Unavailable("the server is shutting down")
        if not isinstance(target, str) or not target or len(target) > MAX_TARGET:
            raise InvalidRequest("'target' must be the id of a node in the graph")
        if client_run_id is not None and (
            not isinstance(client_run_id, str)
            or not client_run_id
            or len(client_run_id) > MAX_CLIENT_RUN_ID
        ):
            raise InvalidRequest(
                f"'clientRunId' must be a non-empty string of at most {MAX_CLIENT_RUN_ID} "
                "characters"
            )
        graph = parse_graph(graph_json, max_nodes=self.config.max_graph_nodes)
        validated = validate_graph(graph, target, self.registry, self.catalog, rng=self._rng)
        with self._lock:
            if len(self._queue) + self._reserved >= self.config.max_queue:
                raise Busy(
                    f"the queue is full ({self.config.max_queue} runs waiting)", retry_after_s=2
                )
            self._reserved += 1
        new = NewRun(
            id=new_run_id(),
            target=target,
            graph=validated.graph.to_json(),
            request_hash=request_hash(graph_json, target),
            client_run_id=client_run_id,
            node_ids=validated.order,
            created_at=time.time(),
        )
        answer: Future[tuple[RunRecord, bool]] = Future()

        def stored(done: Future[tuple[RunRecord, bool]]) -> None:
            with self._lock:
                self._reserved -= 1
            error = done.exception()
            if error is not None:
                answer.set_exception(error)
                return
            record, created = done.result()
            if created:
                self._enqueue(record, validated)
            answer.set_result((record, created))

        self.store.insert_run_future(new).add_done_callback(stored)
        return answer

    def submit(
        self, graph_json: object, target: object, client_run_id: object = None
    ) -> tuple[RunRecord, bool]:
        """Validate and durably store a run. Returns (run, created); created is False when
        `client_run_id` repeats an earlier identical submission. Raises `Conflict` when it
        names a different one, `Busy` when the queue is full."""
        return self._accept(graph_json, target, client_run_id).result()

    async def submit_async(
        self, graph_json: object, target: object, client_run_id: object = None
    ) -> tuple[RunRecord, bool]:
        """`submit` for the event loop: validation runs on a worker thread (a model node's check
        reads its files' headers, and its files are resolved there once for the whole run), and
        the commit is awaited."""
        accepted = await asyncio.to_thread(self._accept, graph_json, target, client_run_id)
        return await asyncio.wrap_future(accepted)

    def _enqueue(self, record: RunRecord, validated: ValidatedGraph | None) -> None:
        with self._work:
            self._live[record.id] = LiveRun.accepted(record, validated)
            self._queue.append(record.id)
            self._work.notify()

    # ---- queries -------------------------------------------------------------------------------

    def get(self, run_id: str) -> tuple[RunRecord, list[Take]]:
        with self._lock:
            live = self._live.get(run_id)
            if live is not None:
                return live.snapshot(), live.take_list()
        record = self.store.get_run(run_id)
        if record is None:
            raise NotFound(f"no run {run_id!r}")
        return record, self.store.takes_for_run(run_id)

    def list_runs(self, limit: int) -> list[tuple[RunSummary, int | None]]:
        """Recent runs, newest first, with the live status and queue position of unfinished ones."""
        summaries = self.store.list_runs(limit)
        out: list[tuple[RunSummary, int | None]] = []
        with self._lock:
            positions = {run_id: i + 1 for i, run_id in enumerate(self._queue)}
            for summary in summaries:
                live = self._live.get(summary.id)
                if live is None:
                    position = None if summary.status.finished else positions.get(summary.id)
                    out.append((summary, position))
                    continue
                summary = RunSummary(
                    summary.id, live.status, summary.target, live.fraction, summary.created_at
                )
                position = 0 if live.status == RunStatus.RUNNING else positions.get(summary.id)
                out.append((summary, position))
        return out

    def live_count(self) -> int:
        """Runs held in memory: the queued, the running and those being recorded. Finished runs
        are dropped, so this is bounded by the queue and the workers, never by the history."""
        with self._lock:
            return len(self._live)

    def stats(self) -> dict[str, int]:
        with self._lock:
            running = sum(1 for r in self._live.values() if r.status == RunStatus.RUNNING)
            return {"queued": len(self._queue), "running": running}

    # ---- events --------------------------------------------------------------------------------

    def subscribe(
        self, run_id: str, loop: asyncio.AbstractEventLoop
    ) -> tuple[WireEvent, Subscriber]:
        """A snapshot of the run and a subscriber for everything after it (nothing missed, nothing
        twice). For a finished run the subscriber holds just its terminal event."""
        subscriber = Subscriber(loop)
        with self._lock:
            live = self._live.get(run_id)
            if live is not None:
                live.subscribers.append(subscriber)
                return serialize.snapshot_event(live.snapshot(), live.take_list()), subscriber
        record = self.store.get_run(run_id)
        if record is None:
            raise NotFound(f"no run {run_id!r}")
        takes = self.store.takes_for_run(run_id)
        if record.status.finished:
            subscriber.publish(serialize.terminal_event(record, takes))
        else:  # stored but not live: this server is stopping; nothing more will come
            subscriber.close()
        return serialize.snapshot_event(record, takes), subscriber

    def unsubscribe(self, run_id: str, subscriber: Subscriber) -> None:
        with self._lock:
            live = self._live.get(run_id)
            if live is not None and subscriber in live.subscribers:
                live.subscribers.remove(subscriber)
        subscriber.close()

    def _publish(self, run: LiveRun, event: WireEvent) -> None:
        for subscriber in run.subscribers:
            subscriber.publish(event)

    def _on_event(self, run: LiveRun, event: RunEvent) -> None:
        with self._lock:
            wire = run.apply(event)
            if wire is not None:
                self._publish(run, wire)

    # ---- cancel --------------------------------------------------------------------------------

    def cancel(self, run_id: str, wait_s: float = 2.0) -> RunRecord:
        """Cancel a queued run at once, or a running one at its next step boundary (waiting up to
        `wait_s` for it to stop). Raises `Conflict` for a finished run."""
        with self._lock:
            live = self._live.get(run_id)
            # A queued run is ours to end only if no other cancel got to it first.
            queued = (
                live is not None and live.status == RunStatus.QUEUED and not live.token.cancelled
            )
            if live is not None:
                if queued:
                    self._queue.remove(run_id)  # no worker can pick it up now
                live.token.cancel("cancelled by the client")
        if live is None:
            record = self.store.get_run(run_id)
            if record is None:
                raise NotFound(f"no run {run_id!r}")
            if record.status.finished:
                raise Conflict(f"run {run_id} has already finished ({record.status.value})")
            if not self.store.cancel_queued(run_id):
                raise Conflict(f"run {run_id} cannot be cancelled now ({record.status.value})")
            return self.get(run_id)[0]
        if queued:
            self._conclude(live, _Outcome(RunStatus.CANCELLED))
        live.finished.wait(wait_s)
        return self.get(run_id)[0]

    # ---- execution -----------------------------------------------------------------------------

    def _worker_loop(self) -> None:
        while True:
            with self._work:
                while not self._queue and not self._closing:
                    self._work.wait()
                if self._closing:
                    return
                run = self._live[self._queue.popleft()]
                run.status = RunStatus.RUNNING
            self._execute(run)

    def _execute(self, run: LiveRun) -> None:
        try:
            outcome = self._run(run)
        except BaseException as exc:  # a bug in the bookkeeping still ends the run
            log.exception("run %s failed outside its nodes", run.id)
            outcome = _Outcome(
                RunStatus.ERROR,
                error=serialize.error_body("internal", f"{type(exc).__name__}: {exc}"),
            )
        try:
            self._conclude(run, outcome)
        except Exception:
            log.exception("could not record the end of run %s", run.id)
            self._abandon(run)
        # What the run freed goes back to the OS, so RSS tracks what is resident, not history.
        with self._lock:
            idle = not self._queue
        self.trimmer.maybe_trim(idle=idle)

    def _run(self, run: LiveRun) -> _Outcome:
        started_at = time.time()
        # Not awaited: the attempt lands in the next group commit (milliseconds), ahead of this
        # run's terminal write in the same queue. Waiting would add a commit to every run.
        marked = self.store.mark_running_future(run.id, started_at)
        marked.add_done_callback(lambda done: _check_marked(run.id, done))
        with self._lock:
            run.attempts += 1
            run.started_at = started_at
            self._publish(run, serialize.run_started_event(run.id, run.attempts))
        try:
            run.token.raise_if_cancelled()
            validated = run.validated or self._validate_again(run.record)
            ctx = ExecutionContext(
                run_id=run.id,
                takes=self.takes,
                cancel=run.token,
                events=lambda event: self._on_event(run, event),
                graph_json=validated.graph.to_json(),
                target=validated.target,
            )
            result = self.executor.execute(validated, ctx)
        except Cancelled:
            if run.token.reason == SHUTDOWN:
                return _Outcome(None)
            return _Outcome(RunStatus.CANCELLED)
        except InlineError as exc:
            if self._closing and isinstance(exc, Unavailable):
                return _Outcome(None)  # the sampler closed under it: run it again next start
            return _Outcome(
                RunStatus.ERROR, error=serialize.error_body(exc.code, exc.message, exc.node_id)
            )
        return _Outcome(RunStatus.DONE, takes=result.takes)

    def _validate_again(self, record: RunRecord) -> ValidatedGraph:
        # Seeds were resolved at submit, so the stored graph reproduces the same pixels.
        graph = parse_graph(record.graph, max_nodes=self.config.max_graph_nodes)
        return validate_graph(graph, record.target, self.registry, self.catalog, rng=self._rng)

    def _conclude(self, run: LiveRun, outcome: _Outcome) -> None:
        if outcome.status is None:
            with self._lock:
                nodes = run.reset_nodes()
                run.status = RunStatus.QUEUED
            self.store.requeue(run.id, nodes=nodes, refund_attempt=True)
            run.finished.set()
            return
        with self._lock:
            for take in outcome.takes:
                if take.run_id == run.id:
                    run.takes[take.id] = take
            nodes = run.final_nodes()
            fraction = 1.0 if outcome.status == RunStatus.DONE else run.fraction
            takes = run.take_list()
            record = replace(
                run.snapshot(),
                status=outcome.status,
                finished_at=time.time(),
                error=outcome.error,
                nodes=nodes,
                fraction=fraction,
            )
        # Durable first; only then may anyone hear that the run ended. The worker does not wait:
        # the announcement rides on the commit, so a slow fsync never holds a worker.
        committed = self.store.finish_future(
            run.id,
            outcome.status,
            nodes=nodes,
            fraction=fraction,
            error=outcome.error,
            takes=takes,
            finished_at=record.finished_at,
        )
        committed.add_done_callback(lambda done: self._announce(run, record, takes, done))

    def _announce(
        self, run: LiveRun, record: RunRecord, takes: list[Take], committed: Future[None]
    ) -> None:
        """Runs once the terminal write is durable (or failed): tell the subscribers."""
        error = committed.exception()
        if error is not None:
            log.error("could not record the end of run %s: %s", run.id, error)
            self._abandon(run)
            return
        event = serialize.terminal_event(record, takes)
        with self._lock:
            self._live.pop(run.id, None)
            run.status = record.status
            subscribers, run.subscribers = run.subscribers, []
        for subscriber in subscribers:
            subscriber.publish(event)
        run.finished.set()

    def _abandon(self, run: LiveRun) -> None:
        """The store refused the terminal write: tell subscribers and forget the run. The store
        still says queued/running, so the next start runs it again."""
        error = serialize.error_body("internal", "the run's result could not be recorded")
        with self._lock:
            failed = replace(run.snapshot(), status=RunStatus.ERROR, error=error)
        event = serialize.terminal_event(failed, [])
        with self._lock:
            self._live.pop(run.id, None)
            subscribers, run.subscribers = run.subscribers, []
        for subscriber in subscribers:
            subscriber.publish(event)
        run.finished.set()


def _check_marked(run_id: str, done: Future[bool]) -> None:
    error = done.exception()
    if error is not None:
        log.error("could not record the start of run %s: %s", run_id, error)
    elif not done.result():
        log.error("run %s started but was not queued in the store", run_id)
