"""Take storage: the only owner of take bytes, hashes and uris."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from inline_core.media import MediaKind
from inline_core.takes import Take


class TakeStore(Protocol):
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
        """Write one take atomically. The id is a function of (run, node, index), so a run that is
        re-executed after a crash rewrites the same take instead of adding a second one."""
        ...

    def reissue(self, take: Take, *, run_id: str, node_id: str, index: int) -> Take:
        """Give this run its own take of `take`'s bytes (a cache hit): a new id, the same bytes,
        hash and params, without re-reading or re-hashing them."""
        ...
