"""Per-row state of the forward in flight, narrowed to a call that runs some of its rows only.

Hooks and caches that keep one entry per row of a batched forward (each row's LoRA stack,
`adapters.rows.RowAdapters`; each row's step cache, `stepcache.backend.StepCacheBackend`) are
`RowScoped`: within `subset(rows)` the model's batch is those rows of the current one, in that
order. Two kinds of call run a subset: the step cache's sub-batch of the rows that compute their
middle blocks, and a transformer that runs a batch in several calls of its own (`ScopesRows`:
xDiT's Z-Image class runs sequences of one padded length per call), which narrows the scopes its
owner hands it for each call. Torch-free."""

from __future__ import annotations

from collections.abc import Generator, Iterable, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from typing import Protocol, runtime_checkable


class RowScoped(Protocol):
    """State with one entry per row of the forward in flight."""

    def subset(self, rows: Sequence[int], /) -> AbstractContextManager[None]: ...


@runtime_checkable
class ScopesRows(Protocol):
    """A module whose forward may run its batch's rows in calls of their own: each such call
    narrows the scopes it was handed (`narrowed`), so every row keeps its own state."""

    def scope_rows(self, scopes: Sequence[RowScoped], /) -> None: ...


@contextmanager
def narrowed(scopes: Iterable[RowScoped], rows: Sequence[int]) -> Generator[None]:
    """Within the block, each of `scopes` sees rows `rows` of its current batch."""
    with ExitStack() as stack:
        for scoped in scopes:
            stack.enter_context(scoped.subset(rows))
        yield
