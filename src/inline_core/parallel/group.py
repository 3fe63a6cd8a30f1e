"""`WorkerGroup`: the server's handle on a resident, torchrun-launched group of ranks.

Started lazily (on the first job, or `start()`), once; a group that failed is torn down and a fresh
one is launched on the next job. Jobs may be submitted from several threads at once: the ranks'
runner decides how they run (the standard step runner batches them in rank 0's step loop; a
one-job runner takes them in turn). `close()` stops it cleanly. Torch-free: the server never
imports torch for this.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from inline_core.errors import Cancelled, Unavailable
from inline_core.parallel.config import GroupConfig
from inline_core.parallel.errors import RemoteJobError, WorkerGroupError, WorkerStartError
from inline_core.parallel.protocol import Failure, Job, Json, PreviewFrame, Result
from inline_core.parallel.session import POLL_S, GroupReply, PendingJob, Session
from inline_core.runtime.cancel import CancelToken


def _ignore_phase(_phase: str) -> None:
    return None


def _ignore_step(_step: int, _count: int) -> None:
    return None


def _ignore_preview(_frame: PreviewFrame) -> None:
    return None


class WorkerGroup:
    def __init__(self, config: GroupConfig) -> None:
        self.config = config
        self._session: Session | None = None
        self._previous: Session | None = None
        self._lock = threading.Lock()  # guards the session pointer
        self._job_ids = itertools.count(1)
        self._closed = False
        self.launches = 0
        self.loads = 0  # pipelines loaded into running ranks (`load`), in place of a launch
        self.retried = 0  # jobs run again after their group failed under them
        self.last_start_s: float | None = None
        # Of the last start: launch to every rank connected (interpreter, torch), then to ready
        # (the runner's imports and model load).
        self.last_connect_s: float | None = None
        self.last_exit_code: int | None = None  # the launcher's, after close()
        # Why the last group that failed did (a rank died or hung...), also once it is replaced.
        self.last_failure: str | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> dict[str, Json]:
        """Launch the group if it is not running and wait until every rank is ready.

        Returns rank 0's description (model, split, engine). Raises `WorkerStartError`."""
        return self._ensure().info

    def load(self, runner_args: Mapping[str, Json]) -> None:
        """Hold another pipeline (the runner factory's args): a running, idle group's ranks
        drop theirs and load it in place, without a relaunch; a group not running starts with
        it on its next job, as does a fresh group after a fault. Raises `WorkerStartError`
        when the ranks cannot load it (the group is torn down, as after a failed start)."""
        with self._lock:
            if self._closed:
                raise Unavailable("the worker group is closed")
            ranks = replace(self.config.ranks, runner_args=dict(runner_args))
            self.config = replace(self.config, ranks=ranks)
            session = self._session
        if session is None or not session.alive:
            return
        try:
            session.load(dict(runner_args))
        except BaseException:
            self._drop(session)
            raise
        self.loads += 1

    def _drop(self, session: Session) -> None:
        """Forget a session that failed to start or load (the next job launches a fresh one),
        keeping it as the previous one and its failure for health."""
        with self._lock:
            if self._session is session:
                self._session, self._previous = None, session
                self.last_failure = session.failure

    def close(self) -> None:
        with self._lock:
            self._closed = True
            session, self._session = self._session, None
        if session is not None:
            session.close()
            self.last_exit_code = session.proc.returncode
            self._previous = session

    @property
    def running(self) -> bool:
        session = self._session
        return session is not None and session.alive

    def pids(self) -> dict[str, Any]:
        """The launcher's and each rank's pid: of the running group, else of the last one (for
        diagnostics and process-table checks)."""
        session = self._session or self._previous
        if session is None:
            return {"launcher": None, "ranks": {}}
        return {"launcher": session.proc.pid, "ranks": dict(session.pids)}

    def gather(self, count: int, timeout_s: float = 30.0) -> None:
        """Have rank 0 admit the next `count` jobs together: its step loop holds at its next
        boundary until they all wait in it (or `timeout_s` passes), so jobs sent at once meet in
        the split's forwards however the threads sending them are scheduled. Starts the group
        if it is not running; a runner without a step loop ignores it."""
        self._ensure().hold(count, timeout_s)

    def stats(self) -> dict[str, Json]:
        session = self._session
        state = "stopped"
        if session is not None:
            state = "failed" if session.failed.is_set() else "starting"
            state = "ready" if session.alive else state
        return {
            "state": "closed" if self._closed else state,
            "worldSize": self.config.nproc,
            "split": str(self.config.ranks.split),
            "launches": self.launches,
            "loads": self.loads,
            "retriedJobs": self.retried,
            "lastStartS": None if self.last_start_s is None else round(self.last_start_s, 3),
            "lastConnectS": None if self.last_connect_s is None else round(self.last_connect_s, 3),
            "failure": None if session is None else session.failure,
            "lastFailure": self.last_failure,
        }

    def _ensure(self) -> Session:
        launched = False
        with self._lock:
            if self._closed:
                raise Unavailable("the worker group is closed")
            session = self._session
            if session is not None and session.failed.is_set():
                self.last_failure = session.failure
                self._previous, self._session, session = session, None, None
            if session is None:
                previous = self._previous
                if previous is not None:  # its devices must be free before new ranks take them
                    previous.torn_down.wait(30.0)
                    self._previous = None
                session = Session(self.config)
                self._session = session
                self.launches += 1
                launched = True
        try:
            session.wait_ready()
        except BaseException:
            self._drop(session)
            raise
        if launched and session.ready_at is not None:
            self.last_start_s = session.ready_at - session.started_at
            if session.connected_at is not None:
                self.last_connect_s = session.connected_at - session.started_at
        return session

    # -- jobs --------------------------------------------------------------------------------

    def submit(
        self,
        params: Mapping[str, Json],
        blobs: Mapping[str, bytes] | None = None,
        *,
        cancel: CancelToken | None = None,
        on_phase: Callable[[str], None] = _ignore_phase,
        on_step: Callable[[int, int], None] = _ignore_step,
        retries: int = 0,
        preview: Mapping[str, Json] | None = None,
        on_preview: Callable[[PreviewFrame], None] = _ignore_preview,
    ) -> GroupReply:
        """Run one job on every rank and return rank 0's output with each rank's metadata.

        A job whose group fails under it (a rank killed or hung) is run again on a fresh group up
        to `retries` times (its progress starts over). With `preview` ({"method", "size",
        "vaeApprox"}) rank 0 renders the job's step previews and each reaches `on_preview`.
        Raises `Cancelled` when `cancel` fires,
        `RemoteJobError` when the job raised in the ranks, `WorkerGroupError` when the group
        failed under it (it is rebuilt on the next job), and `WorkerStartError` when no group
        could be started."""
        token = cancel or CancelToken()
        attempt = 0
        while True:
            try:
                return self._submit_once(
                    params, blobs, token, on_phase, on_step, preview, on_preview
                )
            except WorkerStartError:
                raise  # a group that cannot start will not start on a second try either
            except WorkerGroupError:
                if attempt >= retries or token.cancelled or self._closed:
                    raise
                attempt += 1
                self.retried += 1

    def _submit_once(
        self,
        params: Mapping[str, Json],
        blobs: Mapping[str, bytes] | None,
        token: CancelToken,
        on_phase: Callable[[str], None],
        on_step: Callable[[int, int], None],
        preview: Mapping[str, Json] | None = None,
        on_preview: Callable[[PreviewFrame], None] = _ignore_preview,
    ) -> GroupReply:
        token.raise_if_cancelled()
        session = self._ensure()
        wanted = None if preview is None else dict(preview)
        job = Job(next(self._job_ids), dict(params), dict(blobs or {}), wanted)
        pending = PendingJob(job.job_id, session.world_size, on_phase, on_step, on_preview)
        session.submit(job, pending)
        try:
            self._wait(session, pending, token)
        finally:
            session.release(pending)
        return _reply(pending, token)

    def _wait(self, session: Session, pending: PendingJob, token: CancelToken) -> None:
        cancel_sent = False
        while not pending.done.wait(POLL_S):
            if token.cancelled and not cancel_sent:
                session.cancel(pending.job_id, token.reason)
                cancel_sent = True


def _reply(pending: PendingJob, token: CancelToken) -> GroupReply:
    if pending.error is not None:
        raise pending.error
    failures = {r: o for r, o in pending.outcomes.items() if isinstance(o, Failure)}
    if failures:
        first = min(failures.values(), key=lambda failure: failure.at)  # the rank that failed first
        if first.code == Cancelled.code:
            raise Cancelled(token.reason if token.cancelled else first.message)
        raise RemoteJobError(first.message, code=first.code, status=first.status)
    leader = pending.outcomes.get(0)
    if not isinstance(leader, Result):  # every rank answered, so this is a protocol fault
        raise WorkerGroupError(f"job {pending.job_id} finished without rank 0's result")
    meta = {r: o.meta for r, o in pending.outcomes.items() if isinstance(o, Result)}
    return GroupReply(arrays=dict(leader.arrays), meta=meta)
