"""`LeaseKeeper`: this server's hold on the runs it executes.

Every third of the lease timeout it renews the leases of the runs it holds, and its presence, in
one write; the answer says which leases are still its (another server may have taken a run whose
lease expired), which of its runs a client asked to cancel, and which servers are alive.

A lease is vouched for until `sent + timeout - margin`, where `sent` is when the renewal that
the database accepted left this server: the database set the expiry to its own clock plus the
timeout no earlier than that, so until then no other server can have claimed the run. Past it
(the database did not answer: an outage, or this process was paused) the run is stopped, because
this server can no longer know that the run is still its own. With a store only this server uses
(SQLite) nobody else can take a run, and a lease is always vouched for.
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

# Why a run was stopped: its lease was taken (it writes nothing), or could not be renewed.
LEASE_LOST = "lease lost"
LEASE_UNSURE = "lease not renewed"


@dataclass(eq=False)
class HeldLease:
    lease: Lease
    vouched_until: float  # time.monotonic()
    lost: str | None = None  # LEASE_LOST or LEASE_UNSURE once the run must stop

    @property
    def run_id(self) -> str:
        return self.lease.run_id

    def vouched(self) -> bool:
        return self.lost is None and time.monotonic() < self.vouched_until


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
        room for a step to notice it must stop, and for clocks that tick at slightly other
        rates."""
        return self.timeout_s / 5

    def hold(self, lease: Lease, claimed_at: float) -> HeldLease:
        """Keep `lease` (claimed by a write sent at `claimed_at`, monotonic) renewed."""
        until = float("inf") if not self.store.shared else claimed_at + self.timeout_s
        held = HeldLease(lease, until - (self.margin_s if self.store.shared else 0.0))
        with self._lock:
            self._held[lease.run_id] = held
        return held

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

    def start(self) -> None:
        self._renew()  # this server is listed as alive before it claims anything
        self._thread = threading.Thread(target=self._loop, name="lease-keeper", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.interval_s + 5.0)

    def _loop(self) -> None:
        # Vouching is checked often, so a run stops soon after its lease can no longer be trusted.
        tick = min(0.5, self.interval_s / 2)
        next_renewal = time.monotonic() + self.interval_s
        while not self._stop.wait(tick):
            if time.monotonic() >= next_renewal:
                next_renewal = time.monotonic() + self.interval_s
                self._renew()
            self._stop_unvouched()

    def _renew(self) -> None:
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
            log.debug("lease renewal failed: %s", exc.message)
            return
        except Exception:
            log.exception("lease renewal failed")
            return
        self.servers = renewal.servers
        vouched_until = sent + self.timeout_s - self.margin_s
        with self._lock:  # a run that ended meanwhile is no longer held: nothing was lost
            asked = {r: h for r, h in asked.items() if self._held.get(r) is h}
        for run_id, held in asked.items():
            epoch = renewal.held.get(run_id)
            if epoch == held.lease.epoch:
                if self.store.shared:
                    held.vouched_until = max(held.vouched_until, vouched_until)
            elif held.lost is None:
                held.lost = LEASE_LOST
                log.warning(
                    "run %s: this server's lease is gone (another server took the run after it "
                    "expired); stopping it, nothing more is written for it here",
                    run_id,
                )
                self.on_lost(held, LEASE_LOST)
        for run_id in renewal.cancel_requested:
            self.on_cancel_requested(run_id)

    def _stop_unvouched(self) -> None:
        with self._lock:
            held = list(self._held.values())
        for lease in held:
            if lease.lost is None and not lease.vouched():
                lease.lost = LEASE_UNSURE
                log.warning(
                    "run %s: its lease could not be renewed for %.1f s (the database did not "
                    "answer); stopping it and giving it back",
                    lease.run_id,
                    self.timeout_s - self.margin_s,
                )
                self.on_lost(lease, LEASE_UNSURE)
