"""A lease whose renewal is late holds its run's takes back until a renewal settles it: written
once the lease is vouched for again, refused once another server took it."""

from __future__ import annotations

import threading
import time

from inline_core.runtime.cancel import CancelToken
from inline_core.server.leases import LEASE_LOST, HeldLease
from inline_core.server.stores.records import Lease


def late_lease() -> HeldLease:
    return HeldLease(Lease("run_a", "server-a", 1), vouched_until=time.monotonic() - 1.0)


def test_a_late_lease_waits_and_goes_on_once_renewed() -> None:
    held = late_lease()
    token = CancelToken()

    def renewed() -> None:
        held.vouched_until = time.monotonic() + 60.0

    timer = threading.Timer(0.2, renewed)
    timer.start()
    assert held.wait_vouched(token.wait)
    assert held.vouched() and not token.cancelled


def test_a_late_lease_found_taken_is_refused() -> None:
    held = late_lease()
    token = CancelToken()

    def taken() -> None:
        held.lost = LEASE_LOST

    threading.Timer(0.2, taken).start()
    assert not held.wait_vouched(token.wait)


def test_a_run_stopped_while_its_lease_waits_stops_waiting() -> None:
    held = late_lease()
    token = CancelToken()
    threading.Timer(0.2, token.cancel).start()
    assert not held.wait_vouched(token.wait)
    assert held.lost is None  # nobody said the lease was lost
