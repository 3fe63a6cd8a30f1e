"""`GroupWriter`: every write of a store goes through one thread and one connection.

A write is durable when its future resolves. Writes that arrive together share one transaction and
one commit (group commit); a write that fails does not take the others down with it.

When the database cannot be reached (an outage: a PostgreSQL restart, a network cut) each write is
as patient as its caller asked. `wait_s=0` (a submission, a claim, a heartbeat) fails at once with
`Unavailable` (503 with Retry-After), and so does every such write while the outage lasts. A
patient write (a run's events, its end) is retried with exponential backoff for up to `wait_s`, so
a run that finished during the outage commits when the database returns, and nothing hangs past
that bound. A commit whose answer was lost with the connection is not guessed at: the backend is
asked on the new connection whether that transaction committed.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from inline_core.errors import InlineError, Unavailable
from inline_core.server.stores.sql import Backend, Db, Later

log = logging.getLogger(__name__)

T = TypeVar("T")
Op = Callable[[Db], Any]

# How many pending writes one transaction takes at most.
MAX_GROUP = 512
# Backoff between attempts to reach the database again: doubles from the first to the cap.
FIRST_BACKOFF_S = 0.2
MAX_BACKOFF_S = 1.0

Notices = set[tuple[str, str]]


@dataclass(eq=False)
class _Write:
    op: Op
    future: Future[Any]
    give_up_at: float  # time.monotonic(); during an outage the write fails once this passes
    durable: bool  # False: visible at its commit, stable with the next durable one


class _Outage(Exception):
    """The database went out of reach during a transaction. `token` names the transaction if it
    got as far as COMMIT, whose outcome is then unknown until asked; `outcomes` are its results."""

    def __init__(
        self,
        cause: BaseException,
        token: object | None = None,
        outcomes: list[tuple[Future[Any], object, InlineError | None]] | None = None,
    ) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.token = token
        self.outcomes = outcomes


Outcome = tuple[Future[Any], object, InlineError | None]


def _settled(outcome: Outcome) -> Outcome:
    """A write's result, its `Later` read now that the whole group has been sent."""
    future, result, _error = outcome
    if not isinstance(result, Later):
        return outcome
    try:
        return future, cast(Later[object], result).read(), None
    except InlineError as refusal:  # it changed nothing: the group goes on
        return future, None, refusal


def describe(exc: BaseException) -> str:
    """An error in one line: its type and the first line of its message."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def unreachable(where: str, *, writing: bool = True) -> Unavailable:
    done = "nothing was stored; " if writing else ""
    return Unavailable(
        f"the run database ({where}) cannot be reached right now; {done}retry shortly"
    )


class GroupWriter:
    def __init__(self, backend: Backend, on_notices: Callable[[Notices], None]) -> None:
        self.backend = backend
        self._on_notices = on_notices
        self._writes: queue.SimpleQueue[_Write | None] = queue.SimpleQueue()
        self._closed = False
        self._submit_lock = threading.Lock()
        self._db: Db | None = backend.connect()
        self._down_since: float | None = None
        self._backoff = FIRST_BACKOFF_S
        self._commits = 0
        self._writes_done = 0
        self._commit_s = 0.0
        self._slowest_commit_s = 0.0
        self._sync_s = 0.0  # of which COMMIT itself (the log write and its fsync)
        self._outages = 0
        self._thread = threading.Thread(target=self._loop, name="run-store-writer", daemon=True)
        self._thread.start()

    @property
    def reachable(self) -> bool:
        return self._down_since is None

    @property
    def commits(self) -> int:
        return self._commits

    def submit(
        self, op: Callable[[Db], T], wait_s: float = 0.0, *, durable: bool = True
    ) -> Future[T]:
        """Queue `op` (run inside a transaction on the writer's connection). It must refuse by
        raising an `InlineError` before it changes anything; the rest of its group goes on.
        `durable=False` (a run's progress): its group, if nothing in it is durable, commits
        without waiting for stable storage where the backend keeps commits in order."""
        future: Future[T] = Future()
        with self._submit_lock:  # so nothing is queued behind the writer's stop sentinel
            if self._closed:
                future.set_exception(RuntimeError("the run store is closed"))
                return future
            if wait_s <= 0 and self._down_since is not None:
                future.set_exception(unreachable(self.backend.where))
                return future
            write = _Write(op, cast(Future[Any], future), time.monotonic() + wait_s, durable)
            self._writes.put(write)
        return future

    def submit_later(
        self, op: Callable[[Db], Later[T]], wait_s: float = 0.0, *, durable: bool = True
    ) -> Future[T]:
        """`submit` for a write whose result is read once its group is sent (`Later`)."""
        return cast(Future[T], self.submit(op, wait_s, durable=durable))

    # ---- the writer thread ---------------------------------------------------------------------

    def _loop(self) -> None:
        while True:
            try:
                # While the database is out of reach, wake up to look for it even if nothing
                # patient is waiting: fail-fast writes are refused without reaching this thread.
                timeout = None if self._down_since is None else self._backoff
                first = self._writes.get(timeout=timeout)
            except queue.Empty:
                self._probe()
                continue
            if first is None:
                break
            batch, stop = self._gather([first])
            self._write(batch)
            if stop:
                break
        self._disconnect()

    def _gather(self, batch: list[_Write]) -> tuple[list[_Write], bool]:
        """Add whatever else is queued now (up to MAX_GROUP); True if the stop sentinel came."""
        while len(batch) < MAX_GROUP:
            try:
                item = self._writes.get_nowait()
            except queue.Empty:
                return batch, False
            if item is None:
                return batch, True
            batch.append(item)
        return batch, False

    def _write(self, batch: list[_Write]) -> None:
        stop_after = False
        while batch:
            began = time.perf_counter()
            try:
                self._commit_group(self._connection(), batch)
            except _Outage as outage:
                batch = self._wait_out(outage, batch)
                if batch:
                    batch, stop_after = self._gather(batch)
                continue
            self._account(len(batch), time.perf_counter() - began)
            break
        if stop_after:
            self._writes.put(None)

    def _account(self, writes: int, spent: float) -> None:
        self._commits += 1
        self._writes_done += writes
        self._commit_s += spent
        self._slowest_commit_s = max(self._slowest_commit_s, spent)

    def _connection(self) -> Db:
        if self._db is None:
            try:
                self._db = self.backend.connect()
            except Exception as exc:
                if self.backend.is_outage(exc):
                    raise _Outage(exc) from exc
                raise
        return self._db

    def _disconnect(self) -> None:
        if self._db is not None:
            try:
                self._db.close()
            except Exception:
                pass
            self._db = None

    def _probe(self) -> None:
        """Idle during an outage: try to reach the database again."""
        try:
            db = self._connection()
            db.begin()
            db.execute("SELECT 1")
            db.commit()
        except _Outage as outage:
            self._went_down(outage.cause, waiting=0)
            return
        except Exception as exc:
            if not self.backend.is_outage(exc):
                raise
            self._disconnect()
            self._went_down(exc, waiting=0)
            return
        self._back_up(0)

    def _wait_out(self, outage: _Outage, batch: list[_Write]) -> list[_Write]:
        """One attempt failed for want of the database: settle what can be settled, sleep the
        backoff, and return the writes to try again."""
        self._disconnect()
        if outage.token is not None and outage.outcomes is not None:
            # The COMMIT's answer was lost: ask a new connection whether it happened.
            try:
                if self._connection().committed(outage.token):
                    self._back_up(len(batch))
                    self._resolve(outage.outcomes)
                    return []
            except _Outage:
                pass
            except Exception as exc:
                if not self.backend.is_outage(exc):
                    raise
                self._disconnect()
        now = time.monotonic()
        patient = [w for w in batch if w.give_up_at > now]
        expired = [w for w in batch if w.give_up_at <= now]
        self._went_down(outage.cause, waiting=len(patient))
        for write in expired:
            write.future.set_exception(unreachable(self.backend.where))
        if expired and patient:
            log.error(
                "run store: %d writes gave up waiting for the database; %d still wait",
                len(expired),
                len(patient),
            )
        if patient:
            time.sleep(self._backoff)
            self._backoff = min(self._backoff * 2, MAX_BACKOFF_S)
        return patient

    def _went_down(self, cause: BaseException, waiting: int) -> None:
        reason = describe(cause)
        if self._down_since is None:
            self._down_since = time.monotonic()
            self._outages += 1
            log.error(
                "run store: the database (%s) is unreachable (%s); submissions answer 503 until "
                "it returns, %d writes of running runs wait for it (retrying with backoff)",
                self.backend.where,
                reason,
                waiting,
            )
        else:
            log.warning(
                "run store: the database (%s) is still unreachable after %.1f s (%s); next try "
                "in %.1f s, %d writes waiting",
                self.backend.where,
                time.monotonic() - self._down_since,
                reason,
                self._backoff,
                waiting,
            )

    def _back_up(self, committed: int) -> None:
        if self._down_since is not None:
            log.warning(
                "run store: the database (%s) is reachable again after %.1f s; %d waiting writes "
                "committed",
                self.backend.where,
                time.monotonic() - self._down_since,
                committed,
            )
        self._down_since = None
        self._backoff = FIRST_BACKOFF_S

    def _commit_group(self, db: Db, batch: list[_Write]) -> None:
        """Run `batch` in one transaction and resolve its futures once it is durable.

        A write refuses by raising an `InlineError` before it changes anything, so the group goes
        on without it. Any other error (but an outage) rolls the group back and each write is then
        retried in a transaction of its own, so one bad write fails alone.
        """
        if len(batch) > 1:
            try:
                outcomes = self._transaction(db, batch)
            except _Outage:
                raise
            except Exception:
                log.warning("a group commit failed; retrying its writes one by one", exc_info=True)
                for write in batch:
                    self._commit_group(db, [write])
                return
        else:
            try:
                outcomes = self._transaction(db, batch)
            except _Outage:
                raise
            except Exception as exc:
                log.exception("run store write failed")
                batch[0].future.set_exception(exc)
                return
        self._resolve(outcomes)

    def _resolve(self, outcomes: list[tuple[Future[Any], object, InlineError | None]]) -> None:
        # Only now, with the group durable, does anyone hear about it.
        for future, result, error in outcomes:
            if future.done():
                continue
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(result)

    def _transaction(
        self, db: Db, batch: list[_Write]
    ) -> list[tuple[Future[Any], object, InlineError | None]]:
        outcomes: list[tuple[Future[Any], object, InlineError | None]] = []
        db.notices.clear()
        token: object | None = None
        try:
            db.begin(durable=any(write.durable for write in batch))
            with db.pipelined():  # the group's statements go out together
                for write in batch:
                    try:
                        outcomes.append((write.future, write.op(db), None))
                    except InlineError as refusal:  # refused before writing: the group goes on
                        outcomes.append((write.future, None, refusal))
                outcomes = [_settled(outcome) for outcome in outcomes]
                token = db.commit_token()
            synced = time.perf_counter()
            db.commit()
            self._sync_s += time.perf_counter() - synced
            self._back_up(len(batch))  # before anyone hears of the commit
        except BaseException as exc:
            outage = self.backend.is_outage(exc)
            if not outage:
                try:
                    db.rollback()
                except Exception as rollback_error:
                    if not self.backend.is_outage(rollback_error):
                        raise
                    outage = True
            if outage:
                db.notices.clear()
                raise _Outage(exc, token, outcomes if token is not None else None) from exc
            raise
        notices, db.notices = db.notices, set()
        if notices:
            self._on_notices(notices)
        return outcomes

    # ---- figures and the end -------------------------------------------------------------------

    def stats(self) -> dict[str, float]:
        """Group-commit figures: transactions, writes, writes per transaction, ms per commit."""
        commits, writes, spent = self._commits, self._writes_done, self._commit_s
        return {
            "commits": commits,
            "writes": writes,
            "meanGroup": round(writes / commits, 2) if commits else 0.0,
            "meanCommitMs": round(spent / commits * 1000, 3) if commits else 0.0,
            "meanSyncMs": round(self._sync_s / commits * 1000, 3) if commits else 0.0,
            "slowestCommitMs": round(self._slowest_commit_s * 1000, 3),
            "outages": self._outages,
        }

    def close(self, timeout: float = 10.0) -> None:
        with self._submit_lock:
            if self._closed:
                return
            self._closed = True
            self._writes.put(None)
        self._thread.join(timeout=timeout)
