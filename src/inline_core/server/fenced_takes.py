"""`FencedTakes`: a run's take store that writes only while its lease is vouched for.

Take files live on storage every server shares, and a take's name is a function of (run, node,
index), so the server that re-runs an interrupted run rewrites the same files. A server whose
lease on the run can no longer be vouched for (see `leases.py`) must not write one: the run may
be someone else's by now. The write is refused by cancelling the run, which stops it at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from inline_core.errors import Cancelled
from inline_core.media import MediaKind
from inline_core.runtime.cancel import CancelToken
from inline_core.runtime.store import TakeStore
from inline_core.server.leases import LEASE_UNSURE, HeldLease
from inline_core.takes import Take


@dataclass(frozen=True)
class FencedTakes:
    inner: TakeStore
    held: HeldLease
    token: CancelToken

    def write(
        self,
        *,
        run_id: str,
        node_id: str,
        index: int,
        kind: MediaKind,
        data: bytes,
        suffix: str,
        params: Mapping[str, Any],
    ) -> Take:
        self._vouch()
        return self.inner.write(
            run_id=run_id,
            node_id=node_id,
            index=index,
            kind=kind,
            data=data,
            suffix=suffix,
            params=params,
        )

    def reissue(self, take: Take, *, run_id: str, node_id: str, index: int) -> Take:
        self._vouch()
        return self.inner.reissue(take, run_id=run_id, node_id=node_id, index=index)

    def _vouch(self) -> None:
        if not self.held.vouched():
            reason = self.held.lost or LEASE_UNSURE
            self.token.cancel(reason)
            raise Cancelled(reason)
