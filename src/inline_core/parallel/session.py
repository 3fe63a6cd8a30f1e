"""One launched incarnation of the worker group, from `torchrun` to teardown.

Threads: an acceptor (takes one authenticated connection per rank), a reader per rank (heartbeats,
readiness, job progress and outcomes), and a monitor that applies every deadline. Any fault marks
the session failed once; the monitor then kills the whole process tree and only afterwards fails
the job in flight, so a caller that sees the error can rely on no rank being left running.
The error names the first rank that failed (`faults`) and that rank's own last error (`group_logs`).
"""

from __future__ import annotations

import logging
import os
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing import AuthenticationError
from pathlib import Path

import psutil

import inline_core
from inline_core.errors import Cancelled, InlineError
from inline_core.parallel.config import GroupConfig
from inline_core.parallel.errors import RemoteJobError, WorkerGroupError, WorkerStartError
from inline_core.parallel.faults import FaultLog
from inline_core.parallel.group_logs import GroupLogs
from inline_core.parallel.ipc import Channel, IpcServer
from inline_core.parallel.launch import (
    LaunchPlan,
    is_down,
    is_running,
    kill_tree,
    launch,
    read_tail,
    summarize_failure,
)
from inline_core.parallel.protocol import (
    Array,
    Cancel,
    Failure,
    Hello,
    Hold,
    Job,
    Json,
    Load,
    Message,
    Phase,
    PreviewFrame,
    Progress,
    Ready,
    Result,
    Shutdown,
    StartFailed,
)
from inline_core.parallel.settings import ServerIdentity

log = logging.getLogger(__name__)

POLL_S = 0.05
DRAIN_S = 1.0  # how long a fault waits for the messages a dead rank sent before it went


@dataclass(frozen=True)
class Fault:
    reason: str
    rank: int | None = None  # the rank the reason names, if it names one


@dataclass
class GroupReply:
    """A finished job: rank 0's arrays, and each rank's metadata (debug counters included)."""

    arrays: dict[str, Array]
    meta: dict[int, dict[str, Json]]


@dataclass
class PendingJob:
    job_id: int
    world_size: int
    on_phase: Callable[[str], None]
    on_step: Callable[[int, int], None]
    on_preview: Callable[[PreviewFrame], None] = field(default=lambda _frame: None)
    outcomes: dict[int, Result | Failure] = field(default_factory=dict[int, Result | Failure])
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None  # a group fault, or a callback that raised
    first_failure_at: float | None = None
    last_progress: float = field(default_factory=time.monotonic)

    def finish(self, error: BaseException | None = None) -> None:
        if error is not None and self.error is None:
            self.error = error
        self.done.set()


class Session:
    def __init__(self, config: GroupConfig) -> None:
        self.config = config
        self.world_size = config.nproc
        self.ipc = IpcServer()
        self.logs = GroupLogs(Path(self.ipc.directory), self.world_size)
        self.faults = FaultLog()  # the current job's (or, before the first, the group's)
        self.channels: dict[int, Channel] = {}
        self.pids: dict[int, int] = {}
        self._procs: dict[int, psutil.Process] = {}
        self.info: dict[str, Json] = {}
        self.started_at = time.monotonic()
        self.ready_at: float | None = None
        self.connected_at: float | None = None  # when the last rank said hello
        self.ready = threading.Event()
        self.failed = threading.Event()  # a fault was seen (or close began)
        self.torn_down = threading.Event()  # every process is gone
        self.failure: str | None = None
        self._out_of_step = False  # the fault was a job error that left the ranks out of step
        self._start_failures: list[str] = []
        self._start_failed_at: float | None = None
        self._last_beat: dict[int, float] = {}
        self._ready_said = False  # rank 0 sent `Ready`
        # The jobs sent and not yet settled: several at once when rank 0 batches them.
        self._pending: dict[int, PendingJob] = {}
        self._closing = False
        self._failing = False  # a fault is being explained
        self._lock = threading.Lock()
        self._readers: dict[int, threading.Thread] = {}
        env = {
            **config.env,
            **self.ipc.env(),
            **config.ranks.to_env(),
            **ServerIdentity.of(os.getpid()).to_env(),
        }
        env.setdefault("OMP_NUM_THREADS", str(config.rank_threads()))
        env["PYTHONPATH"] = _python_path(env.get("PYTHONPATH") or os.environ.get("PYTHONPATH"))
        env.setdefault("PYTHONUNBUFFERED", "1")
        plan = LaunchPlan(
            nproc=self.world_size,
            env=env,
            log_path=self.logs.launcher,
            rank_log_dir=self.logs.rank_dir,
            python=config.python,
        )
        try:
            self.proc = launch(plan)
        except OSError as exc:  # e.g. the configured interpreter does not exist
            self.ipc.close()
            raise WorkerStartError(f"could not launch torchrun: {exc}") from exc
        self._acceptor = threading.Thread(target=self._accept, name="inline-accept", daemon=True)
        self._monitor = threading.Thread(target=self._watch, name="inline-monitor", daemon=True)
        self._acceptor.start()
        self._monitor.start()

    # -- lifecycle ---------------------------------------------------------------------------

    def wait_ready(self) -> None:
        """Block until every rank holds the pipeline; raises `WorkerStartError` otherwise."""
        while not self.ready.wait(POLL_S):
            if self.failed.is_set():
                self.torn_down.wait(30.0)
                raise WorkerStartError(f"the worker group could not start: {self.failure}")

    def load(self, runner_args: dict[str, Json]) -> None:
        """Have the idle group's ranks drop their pipeline and load the one `runner_args` name,
        in the processes they have; until rank 0 says ready again the start's rules apply (its
        deadline, no heartbeat deadline while a rank loads, a rank that cannot load ends the
        group). Raises `WorkerStartError` as `wait_ready` does."""
        with self._lock:
            if self.failure is not None or self._closing or self._pending:
                raise WorkerGroupError(
                    f"the worker group cannot load now: {self.failure or 'it is busy'}"
                )
            self.ready.clear()
            self._ready_said = False
            self.started_at, self.ready_at = time.monotonic(), None
            self.faults.clear()  # what a failed load left is its own
            self.logs.mark()
        try:
            self.channels[0].send(Load(runner_args))
        except (OSError, ValueError) as exc:
            self.fail(f"could not send the pipeline to load to rank 0: {exc}")
        self.wait_ready()

    @property
    def alive(self) -> bool:
        return self.ready.is_set() and not self.failed.is_set()

    def fail(self, reason: str, rank: int | None = None) -> None:
        """Record the first fault; the monitor tears the tree down, then fails the pending job.

        `rank` is the rank that `reason` names, if any."""
        with self._lock:
            if self.failure is not None or self._closing or self._failing:
                return
            self._failing = True  # a fault seen meanwhile is this one's consequence
        # The ranks' own output (a crash's last words, a traceback) is in private logs that go
        # with the group: name the first failed rank's last error, keep their ends in our log.
        reason = self._explain(reason, rank)
        with self._lock:
            if self.failure is not None or self._closing:
                return
            self.failure = reason
        end = self.logs.end()
        log.warning("worker group failed: %s\n--- group log (end) ---\n%s", reason, end or "-")
        self.failed.set()

    def _explain(self, reason: str, rank: int | None) -> str:
        self._drain_down_ranks()
        first = self.faults.first()
        if first is None:  # nothing ordered to go by (a start-up that failed, say)
            cause = self.logs.first_error()
            return f"{reason} ({cause})" if cause and cause not in reason else reason
        cause = first.message or self.logs.last_error(first.rank)
        if first.rank != rank:
            reason = f"{reason}; rank {first.rank} failed first ({first.how})"
        if cause is None:
            return self._with_peers_words(reason, first.rank)
        return f"{reason}: {cause}" if cause not in reason else reason

    def _with_peers_words(self, reason: str, silent: int) -> str:
        """A rank that went without a word is often the collateral of a peer that left some (a
        native abort in a collective after that peer's crash), and the server sees the two
        connections close in whatever order its reader threads run. Name what every other rank
        wrote as its last error in this job, whether or not its process has exited yet: its words
        are in its log before its peers can pass the collective it broke, so they are there to
        read even when the silent rank's close is seen first."""
        words = [
            f"rank {peer}{' (down too)' if is_down(proc) else ''} last wrote: {line}"
            for peer, proc in sorted(self._procs.items())
            if peer != silent
            for line in [self.logs.last_error(peer)]
            if line
        ]
        return "; ".join([reason, *words])

    def _drain_down_ranks(self) -> None:
        """Let the readers of ranks already down take what those ranks sent before they went (a
        failure report names the peers that went before it)."""
        deadline = time.monotonic() + DRAIN_S
        for rank, proc in list(self._procs.items()):
            reader = self._readers.get(rank)
            if reader is None or reader is threading.current_thread() or not is_down(proc):
                continue
            reader.join(timeout=max(0.0, deadline - time.monotonic()))

    def close(self) -> None:
        """Shut down cleanly: `Shutdown` to rank 0, then terminate/kill after the grace period."""
        with self._lock:
            already = self._closing or self.failure is not None
            self._closing = True
            self.failure = self.failure or "the worker group was closed"
            pending = list(self._pending.values())
        for job in pending:
            job.finish(WorkerGroupError("the worker group was closed while running this job"))
        if not already:
            leader = self.channels.get(0)
            if leader is not None and self.ready.is_set():
                try:
                    leader.send(Shutdown())
                    self.proc.wait(timeout=self.config.shutdown_grace_s)
                except (OSError, ValueError, subprocess.TimeoutExpired):
                    pass  # terminate/kill below
            self.failed.set()
            self._teardown(grace_s=1.0)
        self.torn_down.wait(30.0)

    def _teardown(self, grace_s: float = 0.0) -> None:
        try:
            kill_tree(self.proc, self.pids.values(), grace_s=grace_s)
        finally:
            for channel in list(self.channels.values()):
                channel.close()
            self.ipc.close()
            self.torn_down.set()

    # -- jobs --------------------------------------------------------------------------------

    def submit(self, job: Job, pending: PendingJob) -> None:
        with self._lock:
            if self.failure is not None or self._closing:
                raise WorkerGroupError(f"the worker group is down: {self.failure or 'closed'}")
            if not self._pending:  # the group was idle: an earlier job's evidence is not this one's
                self.faults.clear()
                self.logs.mark()
            self._pending[pending.job_id] = pending
        try:
            self.channels[0].send(job)
        except (OSError, ValueError) as exc:
            self.fail(f"could not send the job to rank 0: {exc}")

    def cancel(self, job_id: int, reason: str) -> None:
        try:
            self.channels[0].send(Cancel(job_id, reason))
        except (OSError, ValueError):
            pass  # the group is going down; the fault path fails the job

    def hold(self, count: int, timeout_s: float) -> None:
        try:
            self.channels[0].send(Hold(count, timeout_s))
        except (OSError, ValueError) as exc:
            self.fail(f"could not send the hold to rank 0: {exc}")

    def release(self, pending: PendingJob) -> None:
        with self._lock:
            if self._pending.get(pending.job_id) is pending:
                del self._pending[pending.job_id]

    # -- threads -----------------------------------------------------------------------------

    def _accept(self) -> None:
        while len(self.channels) < self.world_size and not self.failed.is_set():
            try:
                channel = self.ipc.accept(timeout=POLL_S)
            except (AuthenticationError, OSError, EOFError):
                continue  # a peer without the key, or one that hung up mid-handshake
            if channel is None:
                continue
            try:
                hello = channel.recv(timeout=30.0)
            except (EOFError, OSError):
                channel.close()
                continue
            if not isinstance(hello, Hello) or hello.rank in self.channels:
                channel.close()
                continue
            with self._lock:
                self.channels[hello.rank] = channel
                self.pids[hello.rank] = hello.pid
                try:  # held, so a reused pid is never mistaken for the rank
                    self._procs[hello.rank] = psutil.Process(hello.pid)
                except psutil.Error:
                    pass
                self._last_beat[hello.rank] = time.monotonic()
                if len(self.channels) == self.world_size:
                    self.connected_at = time.monotonic()
            reader = threading.Thread(
                target=self._read,
                args=(hello.rank, channel),
                name=f"inline-group-rank{hello.rank}",
                daemon=True,
            )
            self._readers[hello.rank] = reader
            reader.start()
            self._set_ready_when_every_hello_is_taken()

    def _read(self, rank: int, channel: Channel) -> None:
        while True:
            try:
                # A beat counts from its arrival, before its bytes are read: the monitor takes
                # unread bytes as life, so it never finds them gone and their beat uncounted.
                channel.wait()
                self._last_beat[rank] = time.monotonic()
                message = channel.recv(timeout=None)
            except (EOFError, OSError, ValueError):
                if self.ready.is_set():  # during start-up the monitor explains the exit
                    self.faults.seen(rank, "it closed its connection")
                    pid = self.pids.get(rank)
                    self.fail(f"rank {rank} (pid {pid}) closed its connection", rank)
                return
            self._last_beat[rank] = time.monotonic()
            if message is not None:
                self._dispatch(rank, message)

    def _dispatch(self, rank: int, message: Message) -> None:
        if isinstance(message, Ready):
            self.info = message.info
            with self._lock:
                self._ready_said = True
            self._set_ready_when_every_hello_is_taken()
        elif isinstance(message, StartFailed):
            self._start_failures.append(message.message)
            if self._start_failed_at is None:
                self._start_failed_at = time.monotonic()
        elif isinstance(message, Phase | Progress | PreviewFrame | Result | Failure):
            with self._lock:
                pending = self._pending.get(message.job_id)
            if pending is None:
                return
            if isinstance(message, PreviewFrame):
                if 0 not in pending.outcomes:  # none after rank 0 ended the job (a failure's)
                    _show(pending, message)
            elif isinstance(message, Phase | Progress):
                self._report(pending, message)
            else:
                self._record(pending, rank, message)

    def _set_ready_when_every_hello_is_taken(self) -> None:
        """Ready once rank 0 said so and this process took every rank's hello: rank 0 can say so
        first (this process's acceptor starved on a loaded machine), and a ready group must know
        every rank's pid and process."""
        with self._lock:
            if self.ready.is_set() or not self._ready_said or len(self.channels) < self.world_size:
                return
            self.ready_at = time.monotonic()
            # Every rank got here (rank 0 says so after gathering them all): their silence
            # counts from now on, not from a beat held back while a library loaded.
            for beating in list(self._last_beat):
                self._last_beat[beating] = self.ready_at
            self.ready.set()

    def _report(self, pending: PendingJob, message: Phase | Progress) -> None:
        pending.last_progress = time.monotonic()
        try:
            if isinstance(message, Phase):
                pending.on_phase(message.phase)
            else:
                pending.on_step(message.step, message.count)
        except Exception as exc:  # the caller's callback failed: stop the job, report that
            if pending.error is None:
                pending.error = exc
            self.cancel(pending.job_id, "a progress callback failed")

    def _record(self, pending: PendingJob, rank: int, outcome: Result | Failure) -> None:
        pending.outcomes[rank] = outcome
        if isinstance(outcome, Failure) and outcome.code != Cancelled.code:
            self.faults.reported(rank, outcome.at, outcome.message, outcome.peers_down)
        if isinstance(outcome, Failure) and pending.first_failure_at is None:
            pending.first_failure_at = time.monotonic()
        final = isinstance(outcome, Failure) and outcome.final  # rank 0 settled it alone
        if final or len(pending.outcomes) == pending.world_size:
            pending.finish()

    def _watch(self) -> None:
        while not self.failed.wait(POLL_S):
            fault = self._check()
            if fault is not None:
                self.fail(fault.reason, fault.rank)
        with self._lock:
            closing = self._closing
        if closing:
            return  # close() tears down and settles the job itself
        self._teardown()
        with self._lock:
            pending = list(self._pending.values())
        for job in pending:
            job.finish(self._job_error(job))

    def _check(self) -> Fault | None:
        now = time.monotonic()
        code = self.proc.poll()
        if code is not None:
            return Fault(self._exit_reason(code))
        if self._start_failed_at is not None:
            # The ranks are leaving on purpose (they stop beating as they go); give the launcher
            # a moment to exit with them, then take the tree down regardless.
            if now - self._start_failed_at > self.config.error_grace_s + 5.0:
                return Fault("; ".join(self._start_failures))
            return None
        return self._check_ranks(now) or self._check_deadlines(now)

    def _check_ranks(self, now: float) -> Fault | None:
        # During start-up a rank that gives up exits on purpose (after `StartFailed`); the
        # launcher's exit, with the reasons the ranks sent, explains it better than its pid.
        for rank, proc in list(self._procs.items()) if self.ready.is_set() else ():
            if not is_running(proc):
                self.faults.seen(rank, "its process is gone")
                return Fault(f"rank {rank} (pid {proc.pid}) died", rank)
        # Silence counts once the group is ready. Before, a rank is importing its libraries and
        # loading its model: a library's initialisation holds the interpreter lock (so the rank's
        # heartbeat thread waits) for a second or more, several on a loaded machine; the start
        # deadline, and the launcher's exit, catch a rank that never gets there.
        for rank in list(self._last_beat) if self.ready.is_set() else ():
            if self._unread(rank):
                continue
            # Read after `_unread`: a beat whose bytes the reader took meanwhile is counted.
            seen = self._last_beat[rank]
            if now - seen > self.config.heartbeat_timeout_s:
                self.faults.seen(rank, "it stopped sending heartbeats")
                return Fault(
                    f"rank {rank} (pid {self.pids.get(rank)}) sent no heartbeat for "
                    f"{now - seen:.1f}s: it is hung or stopped",
                    rank,
                )
        return None

    def _unread(self, rank: int) -> bool:
        """A rank's messages wait unread: this process was too busy (a loaded machine) for its
        reader to take them, so the rank has not gone quiet; its reader will note the beat."""
        channel = self.channels.get(rank)
        return channel is not None and channel.unread()

    def _check_deadlines(self, now: float) -> Fault | None:
        if not self.ready.is_set() and now - self.started_at > self.config.start_timeout_s:
            return Fault(f"not ready within {self.config.start_timeout_s:.0f}s")
        with self._lock:
            pending = [job for job in self._pending.values() if not job.done.is_set()]
        for job in pending:
            step_limit = self.config.step_timeout_s
            if step_limit is not None and now - job.last_progress > step_limit:
                return Fault(f"job {job.job_id} made no progress for {step_limit:.0f}s: hung")
            first = job.first_failure_at
            if first is not None and now - first > self.config.error_grace_s:
                self._out_of_step = True
                missing = sorted(set(range(self.world_size)) - set(job.outcomes))
                return Fault(
                    f"job {job.job_id} failed on some ranks while ranks {missing} did not "
                    "finish: the group is out of step"
                )
        return None

    def _exit_reason(self, code: int) -> str:
        for reader in list(self._readers.values()):
            reader.join(timeout=1.0)  # let StartFailed messages already sent arrive
        if self._start_failures:
            return "; ".join(self._start_failures)
        if not self.ready.is_set():
            summary = self.logs.first_error() or summarize_failure(read_tail(self.logs.launcher))
            return f"torchrun exited with code {code} during start-up: {summary}"
        return f"the group exited with code {code}"

    def _job_error(self, pending: PendingJob) -> InlineError:
        failures = [o for o in pending.outcomes.values() if isinstance(o, Failure)]
        if failures and self._out_of_step:  # the job's own error left the ranks out of step
            first = min(failures, key=lambda failure: failure.at)
            return RemoteJobError(
                f"{first.message} (the worker group was restarted: {self.failure})",
                code=first.code,
                status=first.status,
            )
        return WorkerGroupError(
            f"the worker group failed during job {pending.job_id}: {self.failure}"
        )


def _python_path(existing: str | None) -> str:
    """The ranks import this very `inline_core`, installed or not, ahead of anything else."""
    source_root = str(Path(inline_core.__file__).resolve().parent.parent)
    return os.pathsep.join([source_root, *([existing] if existing else [])])


def _show(pending: PendingJob, frame: PreviewFrame) -> None:
    """A step preview from rank 0: its caller's to show; one that fails never fails the job."""
    try:
        pending.on_preview(frame)
    except Exception:
        log.exception("a step preview from the worker group could not be shown")
