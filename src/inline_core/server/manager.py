"""The run manager: validate -> store -> claim -> execute on worker threads -> record.

Promises it keeps:
- A run is stored (durably) before `submit` returns, and validated before it is stored.
- Runs are claimed from the store in the order they were accepted, as many as there are free
  workers (`config.run_workers`), and only those this server can serve; with several servers on one
  store the oldest waiting run goes to whichever has room first.
- Every run ends: any exception becomes an `error`, and the terminal state and takes are durable
  before any subscriber hears `run_done` / `error` / `cancelled` (subscribers read the stored
  history: the terminal event is written with the terminal state).
- A run held here is held by a lease (`LeaseKeeper`); once it is lost the run stops and nothing
  more is written for it here. A graceful shutdown gives running runs back to the queue; after a
  crash they are run again from the start, within `config.max_retries`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import random
import secrets
import socket
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from concurrent.futures import Future
from contextlib import AbstractContextManager, nullcontext
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
    RunFailed,
    Unavailable,
)
from inline_core.graph.executor import Executor
from inline_core.graph.params import PickerOrder, no_picker_order
from inline_core.graph.registry import Registry
from inline_core.graph.runner import CatalogView
from inline_core.graph.schema import parse_graph
from inline_core.graph.validate import ValidatedGraph, may_wait_on_disk, validate_graph
from inline_core.runtime.context import ExecutionContext
from inline_core.runtime.preview import PreviewTarget
from inline_core.runtime.progress import RunEvent
from inline_core.runtime.store import TakeStore
from inline_core.runtime.video_stream import LiveVideos
from inline_core.server import serialize
from inline_core.server.claimer import Claimer
from inline_core.server.event_feed import EventFeed
from inline_core.server.event_journal import EventJournal
from inline_core.server.events import Subscriber, WireEvent
from inline_core.server.fenced_takes import FencedTakes
from inline_core.server.interactions import RunInteractions
from inline_core.server.leases import LEASE_LOST, HeldLease, LeaseKeeper
from inline_core.server.live_run import LiveRun
from inline_core.server.memory import HeapTrimmer
from inline_core.server.previews import PreviewBoard
from inline_core.server.run_needs import run_needs, server_capabilities
from inline_core.server.run_options import (
    parse_options,
    preview_method,
    refuse_uncached_steps,
    step_cache_choice,
)
from inline_core.server.run_state import NewRun, RunRecord, RunStatus
from inline_core.server.stores.records import (
    CANCEL,
    EVENTS,
    QUEUED,
    Claimed,
    ClaimRequest,
    Lease,
    RunSummary,
)
from inline_core.server.stores.run_store import LeaseLost, RunStore
from inline_core.takes import Take

log = logging.getLogger(__name__)

SHUTDOWN = "shutdown"
CANCELLED_BY_CLIENT = "cancelled by the client"
MAX_CLIENT_RUN_ID = 200
MAX_TARGET = 128
# How often the claimer looks for work without being told (and sweeps expired leases).
CLAIM_POLL_S = 1.0
LOST_RUN = "run %s: another server holds it now; this server stopped it and wrote nothing"


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


def default_server_id() -> str:
    """This machine's name and a random tag: unique per process, readable in health and logs."""
    return f"{socket.gethostname()}-{secrets.token_hex(3)}"


@dataclass(frozen=True)
class _Outcome:
    status: RunStatus | None  # None: interrupted; it goes back to the queue
    error: dict[str, Any] | None = None
    takes: tuple[Take, ...] = field(default_factory=tuple[Take, ...])
    lost: bool = False  # its lease was taken: nothing is written for it


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
        device_kind: Callable[[], str | None] = lambda: None,
        run_scope: Callable[[str], AbstractContextManager[object]] = lambda _run_id: nullcontext(),
        rng: random.Random | None = None,
        picker_order: PickerOrder = no_picker_order,
    ) -> None:
        self.config = config
        self.store = store
        self.server_id = store.server_id
        self.registry = registry
        self.catalog = catalog
        self.takes = takes
        self.executor = executor
        self._device_kind = device_kind
        self._run_scope = run_scope  # around each execution: the model runtime marks it in progress
        self._rng = rng
        self._picker_order = picker_order  # a missing model's message lists its family's first
        self._lock = threading.RLock()
        self._work = threading.Condition(self._lock)
        self._ready: deque[str] = deque()  # claimed here, waiting for a worker
        self._live: dict[str, LiveRun] = {}
        # Graphs validated at submit, reused if this server claims the run (bounded: a run
        # claimed elsewhere is never asked for).
        self._validated: OrderedDict[str, ValidatedGraph] = OrderedDict()
        self._reserved = 0  # queue slots held by submissions not yet committed
        self._queued = 0  # runs waiting in the store: the last claim's count, plus ours since
        self._recording = 0  # runs of `_live` whose end (or requeue) is being written
        self._executing = 0  # runs a worker is executing
        self._closing = False
        self._workers: list[threading.Thread] = []
        self.trimmer = HeapTrimmer()
        self.feed = EventFeed(store)
        self.previews = PreviewBoard()
        self.videos = LiveVideos()  # video nodes decoding here, streamed as they decode
        self.interactions = RunInteractions(store, registry)  # chunked renders steered here
        self.leases = LeaseKeeper(
            store,
            config.lease_timeout_s,
            on_lost=self._lease_lost,
            on_cancel_requested=self._cancel_requested,
            info=lambda: {"workers": config.run_workers},
        )
        # Every journal write extends its runs' leases: a run that makes progress stays here.
        self.journal = EventJournal(
            store,
            self._lock,
            self._journal_failed,
            lease_s=config.lease_timeout_s,
            on_extended=lambda run, sent: self.leases.extended(run.held, sent),
        )
        # What this server can serve, as claims ask for it: computed on the claimer's thread
        # (the catalog rescans its folder now and then), at every poll and at once whenever a
        # submission needs something it does not list (a pack installed, a model added); sorted
        # once there, not at every claim.
        self._capabilities = frozenset[str]()
        self._capability_list: tuple[str, ...] = ()
        self.claimer = Claimer(
            store,
            self._claim_request,
            self._claimed,
            CLAIM_POLL_S,
            on_poll=self._refresh_capabilities,
        )
        store.on_notice = self._on_notice

    # ---- life cycle ----------------------------------------------------------------------------

    def start(self, on_recovered: Callable[[list[RunRecord]], object] | None = None) -> None:
        """Recover what the last process left behind, then start claiming. `on_recovered` sees
        the runs that may run again (the start-up sweep of orphan take files runs there) before
        this server can write a take."""
        if not self.store.shared:
            # The store is this server's alone: whatever was left running was ours.
            may_run = self.store.recover_on_start(self.config.max_retries, holder=None)
        else:
            if self.config.server_id is not None:  # a restart of a named server: its runs
                self.store.recover_on_start(self.config.max_retries, holder=self.server_id)
            may_run = [
                *self.store.unfinished_runs(RunStatus.QUEUED),
                *self.store.unfinished_runs(RunStatus.RUNNING),
            ]
        if on_recovered is not None:
            on_recovered(may_run)
        self._queued = sum(1 for r in may_run if r.status == RunStatus.QUEUED)
        self._refresh_capabilities()
        self.feed.start()
        self.leases.start()
        for i in range(self.config.run_workers):
            worker = threading.Thread(target=self._worker_loop, name=f"run-worker-{i}", daemon=True)
            worker.start()
            self._workers.append(worker)
        self.claimer.start()
        self.claimer.wake()

    def shutdown(self, timeout: float = 5.0) -> None:
        """Stop claiming, interrupt running runs at their next step and give them back."""
        with self._work:
            if self._closing:
                return
            self._closing = True
            for run in self._live.values():
                run.token.cancel(SHUTDOWN)
            self._work.notify_all()
        self.claimer.close()  # a claim in flight hands its runs over, cancelled as they come
        with self._lock:
            running = list(self._live.values())
        deadline = time.monotonic() + timeout
        for run in running:
            run.finished.wait(max(0.0, deadline - time.monotonic()))
        for run in running:
            if not run.finished.is_set():  # stuck in a step that does not check its token
                log.warning(
                    "run %s did not stop in %.1f s; given back to the queue", run.id, timeout
                )
                with self._lock:
                    nodes = run.reset_nodes()
                try:
                    self.store.requeue_future(run.lease, nodes=nodes, refund_attempt=True).result(
                        timeout=5.0
                    )
                except Exception:
                    log.exception("could not give run %s back to the queue", run.id)
        self.trimmer.close()
        self.journal.close()
        self.feed.close()
        self.leases.close()
        for worker in self._workers:
            worker.join(max(0.0, deadline - time.monotonic()) + 0.5)
        self.store.leave()

    # ---- submit --------------------------------------------------------------------------------

    def _accept(
        self, graph_json: object, target: object, client_run_id: object, options: object = None
    ) -> Future[tuple[RunRecord, bool]]:
        if self._closing:
            raise Unavailable("the server is shutting down")
        run_options = parse_options(options)
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
        validated = validate_graph(
            graph,
            target,
            self.registry,
            self.catalog,
            rng=self._rng,
            picker_order=self._picker_order,
        )
        refuse_uncached_steps(run_options, validated)
        with self._lock:
            if self._queued + self._reserved >= self.config.max_queue:
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
            needs=run_needs(validated, self.catalog),
            options=run_options,
        )
        if not self._capabilities.issuperset(new.needs):
            # Maybe a model or a pack arrived since the last look: the claimer's thread looks
            # again (the catalog may rescan its folder: never here, perhaps on the event loop).
            self.claimer.poke()
        answer: Future[tuple[RunRecord, bool]] = Future()
        with self._lock:
            # Kept before the insert is queued: a claim queued behind it may take the run
            # before this submission hears that it committed.
            self._validated[new.id] = validated
            while len(self._validated) > self.config.max_queue:
                self._validated.popitem(last=False)

        def stored(done: Future[tuple[RunRecord, bool]]) -> None:
            error = done.exception()
            with self._lock:
                self._reserved -= 1
                if error is None and done.result()[1]:
                    self._queued += 1
                else:  # not stored, or stored before under its clientRunId
                    self._validated.pop(new.id, None)
            if error is not None:
                answer.set_exception(error)
                return
            if done.result()[1] and not claim_behind:
                self.claimer.wake()
            answer.set_result(done.result())

        inserted = self.store.insert_run_future(new)
        # A claim queued right behind the insert usually shares its transaction, so the run
        # starts one commit after it is submitted, not two. When a claim is already waiting
        # (queued ahead of the insert, so blind to it) this one wakes the claimer once stored.
        claim_behind = self.claimer.wake()
        inserted.add_done_callback(stored)
        return answer

    def submit(
        self,
        graph_json: object,
        target: object,
        client_run_id: object = None,
        options: object = None,
    ) -> tuple[RunRecord, bool]:
        """Validate and durably store a run. Returns (run, created); created is False when
        `client_run_id` repeats an earlier identical submission. Raises `Conflict` when it
        names a different one, `Busy` when the queue is full, `Unavailable` while the store's
        database cannot be reached."""
        return self._accept(graph_json, target, client_run_id, options).result()

    async def submit_async(
        self,
        graph_json: object,
        target: object,
        client_run_id: object = None,
        options: object = None,
    ) -> tuple[RunRecord, bool]:
        """`submit` for the event loop: validation runs on a worker thread when it may wait on
        the disk (a model node's check reads its files' headers, and its files are resolved there
        once for the whole run), else right here: a thread would only add its hand-offs. The
        commit is awaited."""
        if may_wait_on_disk(graph_json, self.registry):
            accepted = await asyncio.to_thread(
                self._accept, graph_json, target, client_run_id, options
            )
        else:
            accepted = self._accept(graph_json, target, client_run_id, options)
        return await asyncio.wrap_future(accepted)

    # ---- claiming ------------------------------------------------------------------------------

    def _claim_request(self, reserved: int) -> ClaimRequest | None:
        """The claim to make now (on the store's writer thread, as the claim runs): as many
        runs as there are free workers, less the `reserved` room of claims not handed over."""
        with self._lock:
            if self._closing:
                return None
            # A run being recorded has left its worker: its slot is free for the next claim.
            busy = len(self._live) - self._recording
            free = self.config.run_workers - busy - reserved
            holding = tuple(self._live)
        if free <= 0 and not self.store.shared:
            return None  # nothing to take, and nobody else's leases to sweep
        return ClaimRequest(
            server_id=self.server_id,
            limit=max(0, free),
            capabilities=self._capability_list,
            holding=holding,
            lease_s=self.config.lease_timeout_s,
            max_retries=self.config.max_retries,
            take_over_expired=self.store.shared,
        )

    def _refresh_capabilities(self) -> None:
        found = server_capabilities(self.registry, self.catalog, self._device_kind())  # sorted
        with self._lock:  # a claim reads both together
            self._capabilities = frozenset(found)
            self._capability_list = found

    def _claimed(self, claimed: Claimed, claimed_at: float) -> None:
        """A claim is durable: hand its runs to the workers."""
        for run_id in claimed.requeued:
            log.warning("run %s: its server stopped renewing its lease; queued again", run_id)
        for run_id in claimed.exhausted:
            log.warning("run %s: its server stopped renewing its lease; no retries left", run_id)
        for record in claimed.runs:
            self.leases.note_claimed(record.id, claimed.ran_before.get(record.id, 0))
        with self._work:
            self._queued = claimed.queued
            for record in claimed.runs:
                self._admit(record, claimed_at)

    def _admit(self, record: RunRecord, claimed_at: float) -> None:
        """A run this server just claimed: hand it to a worker (called with the lock held)."""
        held = self.leases.hold(Lease(record.id, self.server_id, record.lease_epoch), claimed_at)
        run = LiveRun.claimed(record, self._validated.pop(record.id, None), held)
        self._live[run.id] = run
        if self._closing:  # claimed as we stopped: straight back to the queue
            run.token.cancel(SHUTDOWN)
        self._ready.append(run.id)
        self._work.notify()

    # ---- notices from the store ----------------------------------------------------------------

    def _on_notice(self, channel: str, payload: str) -> None:
        if channel == EVENTS:
            self.feed.notice(payload)
        elif channel == QUEUED and self.store.shared and payload != self.server_id:
            # Another server's submission, or runs queued again. This server's own submissions
            # wake the claimer themselves (`_accept`), and so does every run a store of this
            # server's alone queues.
            self.claimer.wake()
        elif channel == CANCEL:
            self._cancel_requested(payload)

    def _cancel_requested(self, run_id: str) -> None:
        with self._lock:
            run = self._live.get(run_id)
            if run is not None and not run.token.cancelled:
                run.token.cancel(CANCELLED_BY_CLIENT)

    def _lease_lost(self, held: HeldLease, reason: str) -> None:
        with self._lock:
            run = self._live.get(held.run_id)
            if run is not None and run.held is held:
                run.token.cancel(reason)

    def _journal_failed(self, run: LiveRun, error: BaseException) -> None:
        if isinstance(error, LeaseLost):
            run.held.lost = LEASE_LOST
            run.token.cancel(LEASE_LOST)
        else:
            log.error("could not record events of run %s: %s", run.id, error)

    # ---- queries -------------------------------------------------------------------------------

    def get(self, run_id: str) -> tuple[RunRecord, list[Take]]:
        with self._lock:
            live = self._live.get(run_id)
            if live is not None:
                return live.snapshot(), live.take_list()
        view = self.store.view(run_id)
        if view is None:
            raise NotFound(f"no run {run_id!r}")
        return view.record, view.takes

    def waiting_for(self, record: RunRecord) -> str | None:
        """What a queued run waits for (None: it is not queued). A running one waiting for the
        device says so in its node's `waitingFor` (`sampling/waits.py`)."""
        if record.status != RunStatus.QUEUED:
            return None
        if self.store.shared:
            return "a free run slot on a server that can run it (queuePosition in GET /v1/runs)"
        with self._lock:
            busy = self._executing
        return (
            f"a free run slot ({busy} running here, at most {self.config.run_workers}: "
            "INLINE_RUN_WORKERS); its place in the queue is queuePosition in GET /v1/runs"
        )

    def list_runs(self, limit: int) -> list[RunSummary]:
        """Recent runs, newest first: queued ones with their place in the queue, running ones
        with the server that holds them (this server's with their live progress)."""
        summaries = self.store.list_runs(limit)
        out: list[RunSummary] = []
        with self._lock:
            for summary in summaries:
                live = self._live.get(summary.id)
                if live is not None and not summary.status.finished:
                    summary = replace(summary, status=live.status, fraction=live.fraction)
                out.append(summary)
        return out

    def live_count(self) -> int:
        """Runs held in memory: the running and those being recorded. Finished runs are
        dropped, so this is bounded by the workers, never by the history."""
        with self._lock:
            return len(self._live)

    def stats(self) -> dict[str, int]:
        with self._lock:
            running = sum(1 for r in self._live.values() if r.status == RunStatus.RUNNING)
            return {"queued": self._queued, "running": running}

    # ---- events --------------------------------------------------------------------------------

    def subscribe(
        self, run_id: str, loop: asyncio.AbstractEventLoop
    ) -> tuple[WireEvent, Subscriber]:
        """A snapshot of the run and a subscriber for everything after it, from the stored
        history (nothing missed, nothing twice, whichever server runs it). For a finished run
        the subscriber holds just its terminal event."""
        view = self.store.view(run_id)
        if view is None:
            raise NotFound(f"no run {run_id!r}")
        subscriber = Subscriber(loop)
        if view.record.status.finished:
            subscriber.publish(serialize.terminal_event(view.record, view.takes))
        else:
            self.feed.watch(run_id, subscriber, view.cursor)
        return serialize.snapshot_event(view.record, view.takes), subscriber

    def unsubscribe(self, run_id: str, subscriber: Subscriber) -> None:
        self.feed.unwatch(run_id, subscriber)
        subscriber.close()

    def _record(self, run: LiveRun, event: WireEvent) -> None:
        """Append to the run's history (call with the lock held)."""
        self.journal.record(run, event)

    def _on_event(self, run: LiveRun, event: RunEvent) -> None:
        with self._lock:
            wire = run.apply(event)
            if wire is not None:
                self._record(run, wire)

    # ---- cancel --------------------------------------------------------------------------------

    def cancel(self, run_id: str, wait_s: float = 2.0) -> RunRecord:
        """Cancel a queued run at once, or a running one (here or on another server) within one
        transformer block (a pack node: its worker ended if it does not stop), waiting up to
        `wait_s` for it to stop. Raises `Conflict` for a finished run."""
        with self._lock:
            live = self._live.get(run_id)
            if live is not None:
                live.token.cancel(CANCELLED_BY_CLIENT)
        if live is not None:
            live.finished.wait(wait_s)
            return self.get(run_id)[0]
        record = self.store.get_run(run_id)
        if record is None:
            raise NotFound(f"no run {run_id!r}")
        if record.status.finished:
            raise Conflict(f"run {run_id} has already finished ({record.status.value})")
        if record.status == RunStatus.QUEUED and self.store.cancel_queued(run_id):
            with self._lock:
                self._queued = max(0, self._queued - 1)
            return self.get(run_id)[0]
        # Running, here since a moment ago or on another server: its holder hears of it.
        with self._lock:
            live = self._live.get(run_id)
            if live is not None:
                live.token.cancel(CANCELLED_BY_CLIENT)
        if live is None and self.store.request_cancel(run_id) is None:
            record = self.store.get_run(run_id)
            if record is not None and record.status.finished:
                raise Conflict(f"run {run_id} has already finished ({record.status.value})")
        deadline = time.monotonic() + wait_s
        while True:
            record, _takes = self.get(run_id)
            if record.status.finished or time.monotonic() >= deadline:
                return record
            time.sleep(0.02)

    # ---- execution -----------------------------------------------------------------------------

    def _worker_loop(self) -> None:
        while True:
            with self._work:
                while not self._ready and not self._closing:
                    self._work.wait()
                if not self._ready:
                    return
                run = self._live[self._ready.popleft()]
            self._execute(run)

    def _execute(self, run: LiveRun) -> None:
        with self._lock:
            self._executing += 1
        self.trimmer.busy()
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
            self._forget(run)
        # What the runs freed goes back to the OS once the server is idle, so RSS tracks what is
        # resident, not history. Idle: no run executes here, nothing claimed here waits for a
        # worker and the store's queue looked empty (the claimed runs alone say nothing: a claim
        # takes only what the workers can start).
        with self._lock:
            self._executing -= 1
            idle = not self._executing and not self._ready and self._queued <= 0
        if idle:
            self.trimmer.went_idle()
        else:
            self.trimmer.maybe_trim()

    def _run(self, run: LiveRun) -> _Outcome:
        # Its run_started is in the history already: the claim wrote it.
        try:
            run.token.raise_if_cancelled()
            validated = run.validated or self._validate_again(run.record)
            takes: TakeStore = self.takes
            if self.store.shared:
                takes = FencedTakes(self.takes, run.held, run.token)
            ctx = ExecutionContext(
                run_id=run.id,
                takes=takes,
                cancel=run.token,
                events=lambda event: self._on_event(run, event),
                graph_json=validated.graph.to_json(),
                target=validated.target,
                preview=PreviewTarget(
                    preview_method(run.record.options, self.config.preview_method),
                    self.previews.publish,
                ),
                step_cache=step_cache_choice(run.record.options),
                videos=self.videos,
                interactions=self.interactions.stored(run.id, validated.descriptors.values()),
                interaction_board=self.interactions.board,
            )
            with self._run_scope(run.id):
                result = self.executor.execute(validated, ctx)
        except Cancelled:
            log.info("run %s stopped: %s", run.id, run.token.reason)
            return self._interrupted(run.token.reason)
        except InlineError as exc:
            if self._closing and isinstance(exc, Unavailable):
                return _Outcome(None)  # the sampler closed under it: run it again next start
            # Every run error in the server's log, with its run id: a pack's crash, time limit or
            # memory kill among them (each an InlineError naming the pack and node).
            where = f" at node {exc.node_id!r}" if exc.node_id else ""
            # A node's own bug (an exception the executor wrapped) is logged with its traceback.
            cause = exc.__cause__
            bug = isinstance(exc, RunFailed) and cause is not None
            bug = bug and not isinstance(cause, InlineError)
            log.error(
                "run %s failed%s (%s): %s",
                run.id,
                where,
                exc.code,
                exc.message,
                exc_info=exc if bug else None,
            )
            return _Outcome(
                RunStatus.ERROR, error=serialize.error_body(exc.code, exc.message, exc.node_id)
            )
        if run.held.lost is not None:  # it finished, but the run is no longer ours to record
            return self._interrupted(run.held.lost)
        return _Outcome(RunStatus.DONE, takes=result.takes)

    @staticmethod
    def _interrupted(reason: str) -> _Outcome:
        if reason == LEASE_LOST:
            return _Outcome(None, lost=True)
        if reason == SHUTDOWN:
            return _Outcome(None)
        return _Outcome(RunStatus.CANCELLED)

    def _validate_again(self, record: RunRecord) -> ValidatedGraph:
        # Seeds were resolved at submit, so the stored graph reproduces the same pixels.
        graph = parse_graph(record.graph, max_nodes=self.config.max_graph_nodes)
        return validate_graph(
            graph,
            record.target,
            self.registry,
            self.catalog,
            rng=self._rng,
            picker_order=self._picker_order,
        )

    def _slot_freed(self) -> None:
        """A worker's slot is free: claim, if a run may be waiting for it. A store of this
        server's alone counts its queued runs exactly (`_queued`), so an empty queue costs no
        claim; a shared one is claimed from anyway (other servers queue and lapse runs)."""
        with self._lock:
            waiting = self._queued > 0
        if waiting or self.store.shared:
            self.claimer.wake()

    def _conclude(self, run: LiveRun, outcome: _Outcome) -> None:
        with self._lock:
            run.recording = True
            self._recording += 1
        self._slot_freed()
        if outcome.lost:
            log.warning(LOST_RUN, run.id)
            self._forget(run)
            return
        if outcome.status is None:
            with self._lock:
                self.journal.drain(run)  # an interrupted attempt's last ticks: not worth keeping
                nodes = run.reset_nodes()
            given_back = self.store.requeue_future(run.lease, nodes=nodes, refund_attempt=True)
            given_back.add_done_callback(lambda done: self._given_back(run, done))
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
            events = [*self.journal.drain(run), serialize.terminal_event(record, takes)]
        # Durable first; the terminal event is part of the same write, so nobody hears of the
        # end before it is stored. The worker does not wait: a slow fsync never holds it.
        committed = self.store.finish_future(
            run.lease,
            run.attempts,
            outcome.status,
            nodes=nodes,
            fraction=fraction,
            error=outcome.error,
            takes=takes,
            events=events,
            finished_at=record.finished_at,
        )
        committed.add_done_callback(lambda done: self._recorded(run, record, done))

    def _recorded(self, run: LiveRun, record: RunRecord, committed: Future[None]) -> None:
        """Runs once the terminal write is durable (or failed)."""
        error = committed.exception()
        if isinstance(error, LeaseLost):
            log.warning("run %s: its lease was lost before its end was recorded", run.id)
        elif isinstance(error, Unavailable):
            log.error(
                "run %s: the database stayed unreachable for %.0f s; its result was not "
                "recorded, and it will run again once its lease expires",
                run.id,
                self.store.retry_s,
            )
        elif error is not None and record.status != RunStatus.ERROR:
            # Something about this result cannot be stored: end the run as an error instead.
            log.error("could not record the end of run %s: %s", run.id, error)
            failed = replace(
                record,
                status=RunStatus.ERROR,
                error=serialize.error_body("internal", "the run's result could not be recorded"),
            )
            self.store.finish_future(
                run.lease,
                run.attempts,
                RunStatus.ERROR,
                nodes=record.nodes,
                fraction=record.fraction,
                error=failed.error,
                events=[serialize.terminal_event(failed, [])],
            ).add_done_callback(lambda done: self._recorded(run, failed, done))
            return
        elif error is not None:
            log.error("could not record the end of run %s: %s", run.id, error)
        self._forget(run)

    def _given_back(self, run: LiveRun, done: Future[bool]) -> None:
        error = done.exception()
        if error is not None:
            log.error("could not give run %s back to the queue: %s", run.id, error)
        elif not done.result():  # its lease was gone: the requeue matched nothing
            log.warning(LOST_RUN, run.id)
        self._forget(run)
        self.claimer.wake()  # the run is queued again, and `_queued` does not count it

    def _forget(self, run: LiveRun) -> None:
        """The run is no longer this server's: free its lease and its worker slot (in that order:
        until it leaves `_live` this server cannot claim it again)."""
        self.leases.release(run.held)
        with self._lock:
            if self._live.get(run.id) is run:
                del self._live[run.id]
                if run.recording:
                    self._recording -= 1
        run.finished.set()
        # No claim here: its slot counted as free from `_conclude` on, which claimed for it.
