"""`LeaseKeeper`: this server's hold on the runs it executes.

Every third of the lease timeout it renews the leases of the runs it holds, and its presence, in
one write; the answer says which leases are still its (another server may have taken a run whose
lease expired), which of its runs a client asked to cancel, and which servers are alive. A renewal
that failed is tried again at the next tick, not a whole interval later: after an outage the
leases are renewed as soon as the database answers.

A lease is vouched for until `sent + timeout - margin`, where `sent` is when the renewal that
the database accepted left this server: the database set the expiry to its own clock plus the
timeout no earlier than that, so until then no other server can have claimed the run. A run's
journal write extends its lease the same way (`extended`): a server whose runs make progress keeps
them even when this thread's renewals come late (an overloaded machine), while a frozen one
(SIGSTOP, a paused VM) writes nothing and loses them once they expire. Past it
(the database did not answer: an outage, or this process was paused or starved) the run is not
stopped: it keeps computing, and its takes wait (`FencedTakes`) until a renewal says whether the
lease is still its own. Only a renewal that finds the lease gone (another server took the run)
stops the run. So a live server that renews, however slowly it computes, keeps its runs; one
whose renewals are late loses nothing unless another server took the run meanwhile. With a store
only this server uses (SQLite) nobody else can take a run, and a lease is always vouched for.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from inline_core.errors import InlineError
from inline_core.server.stores.records import Lease, ServerSeen
from inline_core.server.stores.run_store import RunStore

log = logging.getLogger(__name__)

# Why a run was stopped: another server took it (it writes nothing more here).
LEASE_LOST = "lease lost"
# A run claimed after this many holders ran it is reported (log, health's `leasing.movedRuns`):
# kills explain a few; more says leases lapse on live servers.
MANY_HOLDERS = 4
MOVED_KEPT = 32  # the runs health lists at most
# How often a take that waits for its lease to be vouched for again looks (seconds).
VOUCH_POLL_S = 0.05


@dataclass(eq=False)
class HeldLease:
    lease: Lease
    vouched_until: float  # time.monotonic()
    lost: str | None = None  # LEASE_LOST once the run must stop
    unsure_since: float | None = None  # time.monotonic() when it was last seen unvouched

    @property
    def run_id(self) -> str:
        return self.lease.run_id

    def vouched(self) -> bool:
        return self.lost is None and time.monotonic() < self.vouched_until

    def wait_vouched(self, stopped: Callable[[float], bool]) -> bool:
        """Wait until the lease is vouched for (True) or lost (False); `stopped(timeout)` sleeps
        and says whether the run was stopped meanwhile (False then too)."""
        while not self.vouched():
            if self.lost is not None or stopped(VOUCH_POLL_S):
                return False
        return True


@dataclass
class RenewalTiming:
    """How this server's renewals went, as health shows it (`leaseRenewal`): a renewal that
    comes late or answers slowly is what makes leases lapse, so it is measured, and logged
    when it is late."""

    renewals: int = 0
    failures: int = 0
    last_ok: float | None = None  # time.monotonic() of the last accepted renewal's send
    longest_gap_s: float = 0.0  # between two accepted renewals' sends
    slowest_answer_s: float = 0.0  # from a renewal's send to its answer
    unsure: int = 0  # runs whose lease went unvouched (a renewal came too late)
    unsure_s: float = 0.0  # the longest such spell
    taken: int = 0  # runs another server took while this one was alive
    moved: dict[str, int] = field(default_factory=dict[str, int])  # run -> holders before

    def to_json(self, now: float) -> dict[str, Any]:
        return {
            "renewals": self.renewals,
            "failures": self.failures,
            "sinceLastS": None if self.last_ok is None else round(now - self.last_ok, 2),
            "longestGapS": round(self.longest_gap_s, 2),
            "slowestAnswerS": round(self.slowest_answer_s, 2),
            "unsureRuns": self.unsure,
            "longestUnsureS": round(self.unsure_s, 2),
            "takenWhileAlive": self.taken,
            "movedRuns": dict(self.moved),
        }


@dataclass
class LeaseKeeper:
    store: RunStore
    timeout_s: float
    # Called (from the keeper's thread) when a held run must stop, with the reason.
    on_lost: Callable[[HeldLease, str], None]
    # Called when a client (on any server) asked to cancel a run held here.
    on_cancel_requested: Callable[[str], None]
    info: Callable[[], dict[str, Any]] = lambda: {}
    started_at: float = field(default_factory=time.time)
    servers: list[ServerSeen] = field(default_factory=list[ServerSeen])
    timing: RenewalTiming = field(default_factory=RenewalTiming)
    _held: dict[str, HeldLease] = field(default_factory=dict[str, HeldLease])
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    @property
    def interval_s(self) -> float:
        return self.timeout_s / 3

    @property
    def margin_s(self) -> float:
        """Kept between the last moment a lease is vouched for and its expiry in the database:
        room for a take being written to finish, and for clocks that tick at slightly other
        rates."""
        return self.timeout_s / 5

    def hold(self, lease: Lease, claimed_at: float) -> HeldLease:
        """Keep `lease` (claimed by a write sent at `claimed_at`, monotonic) renewed."""
        until = float("inf") if not self.store.shared else claimed_at + self.timeout_s
        held = HeldLease(lease, until - (self.margin_s if self.store.shared else 0.0))
        with self._lock:
            self._held[lease.run_id] = held
        return held

    def extended(self, held: HeldLease, sent: float) -> None:
        """A write sent at `sent` (monotonic) extended `held`'s lease in the database, as a
        renewal would (a run's progress: `EventJournal`): vouched for accordingly."""
        if not self.store.shared or held.lost is not None:
            return
        with self._lock:
            held.vouched_until = max(held.vouched_until, sent + self.timeout_s - self.margin_s)
        self._sure_again(held, sent)

    def release(self, held: HeldLease) -> None:
        with self._lock:
            if self._held.get(held.run_id) is held:
                del self._held[held.run_id]

    def servers_alive(self) -> list[ServerSeen]:
        """The servers alive now (from the store; the last heartbeat's view while it cannot
        be read)."""
        try:
            return self.store.servers_alive(self.timeout_s)
        except InlineError:
            return self.servers

    def holding(self) -> list[str]:
        with self._lock:
            return sorted(self._held)

    def note_claimed(self, run_id: str, ran_before: int) -> None:
        """This server claimed `run_id`, which `ran_before` executions (on any server) had
        started already: a run moved that often is reported, not moved on silently."""
        if ran_before < MANY_HOLDERS:
            return
        log.warning(
            "run %s: claimed after %d servers started it; runs this restless mean leases lapse "
            "on servers that are alive (see health's leasing)",
            run_id,
            ran_before,
        )
        moved = self.timing.moved
        moved[run_id] = ran_before
        if len(moved) > MOVED_KEPT:
            del moved[next(iter(moved))]

    def leasing_json(self) -> dict[str, Any]:
        return self.timing.to_json(time.monotonic())

    def start(self) -> None:
        self._renew()  # this server is listed as alive before it claims anything
        self._thread = threading.Thread(target=self._loop, name="lease-keeper", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.interval_s + 5.0)

    def _loop(self) -> None:
        # Vouching is checked often, so a take waits no longer than it must; a failed renewal
        # is tried again at the next tick.
        tick = min(0.5, self.interval_s / 2)
        next_renewal = time.monotonic() + self.interval_s
        while not self._stop.wait(tick):
            if time.monotonic() >= next_renewal:
                began = time.monotonic()
                if self._renew():
                    next_renewal = began + self.interval_s
            self._note_unvouched()

    def _renew(self) -> bool:
        """One renewal; False if the database did not answer."""
        with self._lock:
            asked = dict(self._held)
        sent = time.monotonic()
        try:
            renewal = self.store.heartbeat_future(
                started_at=self.started_at,
                holding=sorted(asked),
                lease_s=self.timeout_s,
                info=self.info(),
            ).result(timeout=self.interval_s + 5.0)
        except InlineError as exc:  # the database is unreachable: leases age until it returns
            self.timing.failures += 1
            log.debug("lease renewal failed: %s", exc.message)
            return False
        except Exception:
            self.timing.failures += 1
            log.exception("lease renewal failed")
            return False
        self._timed(sent, time.monotonic())
        self.servers = renewal.servers
        vouched_until = sent + self.timeout_s - self.margin_s
        with self._lock:  # a run that ended meanwhile is no longer held: nothing was lost
            asked = {r: h for r, h in asked.items() if self._held.get(r) is h}
        for run_id, held in asked.items():
            epoch = renewal.held.get(run_id)
            if epoch == held.lease.epoch:
                if self.store.shared:
                    held.vouched_until = max(held.vouched_until, vouched_until)
                self._sure_again(held, sent)
            elif held.lost is None:
                held.lost = LEASE_LOST
                self.timing.taken += 1
                log.warning(
                    "run %s: this server's lease is gone (another server took the run after it "
                    "expired); stopping it, nothing more is written for it here",
                    run_id,
                )
                self.on_lost(held, LEASE_LOST)
        for run_id in renewal.cancel_requested:
            self.on_cancel_requested(run_id)
        return True

    def _timed(self, sent: float, answered: float) -> None:
        timing = self.timing
        answer_s = answered - sent
        gap_s = 0.0 if timing.last_ok is None else sent - timing.last_ok
        timing.renewals += 1
        timing.last_ok = sent
        timing.longest_gap_s = max(timing.longest_gap_s, gap_s)
        timing.slowest_answer_s = max(timing.slowest_answer_s, answer_s)
        # Late enough to eat into the margin: a lease lapses once this reaches timeout - margin.
        if gap_s + answer_s > self.timeout_s / 2:
            log.warning(
                "lease renewal late: %.1f s since the last one (every %.1f s), answered in "
                "%.2f s; leases lapse after %.1f s without one",
                gap_s,
                self.interval_s,
                answer_s,
                self.timeout_s - self.margin_s,
            )

    def _sure_again(self, held: HeldLease, sent: float) -> None:
        if held.unsure_since is None or not held.vouched():
            return
        spell = sent - held.unsure_since
        held.unsure_since = None
        self.timing.unsure_s = max(self.timing.unsure_s, spell)
        log.warning(
            "run %s: its lease was renewed again after %.1f s unconfirmed; it goes on",
            held.run_id,
            spell,
        )

    def _note_unvouched(self) -> None:
        with self._lock:
            held = list(self._held.values())
        for lease in held:
            if lease.lost is None and lease.unsure_since is None and not lease.vouched():
                lease.unsure_since = time.monotonic()
                self.timing.unsure += 1
                log.warning(
                    "run %s: its lease could not be renewed for %.1f s (the database did not "
                    "answer in time); it goes on computing and writes no take until a renewal "
                    "says whether the run is still this server's",
                    lease.run_id,
                    self.timeout_s - self.margin_s,
                )
