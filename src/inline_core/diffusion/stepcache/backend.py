"""`StepCacheBackend`: DBCache kept per request inside one batched forward.

cache-dit 1.5's DBCache keeps one cache context per transformer: its residual buffers hold the
whole batch, its step counter counts transformer calls, and it compares the batch's residual as
one mean (`CachedContextManager.similarity`), so one decision holds for every row. Requests at
different steps, or with other settings, cannot share its forward: that is why vLLM-Omni turns
cache backends off under step batching and SGLang refuses them. This backend keeps the same
algorithm per row instead, on hooks of its own:
- each row of a forward has its own `RowCache` (its request's settings, residuals and counts);
- every row runs its first `front_blocks` blocks; their residual (output minus the input of the
  first block) is compared with the one of that row's last computed step, relative L1 over the
  row's real tokens, against that row's threshold (all rows' sums in one tensor: one device
  sync per forward, and one all-reduce across a worker group's ranks, so every rank decides the
  same);
- rows in warmup, past their cap on consecutive reuses, or over their threshold run the middle
  blocks as a sub-batch (a row subset of every batched argument, trimmed to the longest real
  sequence among them); the other rows add the middle residual of their last computed step;
- every row runs its last `back_blocks` blocks.
Rows without a cache always compute, so cached and uncached requests share a forward, and a
forward where every row computes calls every block on the whole batch, as without the cache.

While a cached forward runs, the transformer's block list is swapped for proxies that route
each call through `_Pass.block`; outside one the model is untouched. Per-row hooks inside the
blocks (the LoRA rows) are narrowed to the sub-batch through `RowScoped.subset`; the backend
is one too (`subset`), for a transformer that runs a batch's rows in calls of their own (xDiT's
Z-Image class: one sequence length a call, `row_scopes.ScopesRows`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Generator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, cast
from weakref import WeakKeyDictionary, ref

import torch
from torch import nn

from inline_core.diffusion.row_scopes import RowScoped, narrowed
from inline_core.diffusion.stepcache.layout import BlockLayout
from inline_core.diffusion.stepcache.rows import RowCache

_ON_MODEL: WeakKeyDictionary[nn.Module, StepCacheBackend] = WeakKeyDictionary()

Args = tuple[Any, ...]
Kwargs = dict[str, Any]


class StepCacheBackend:
    """The step cache on one transformer; every pipeline over it shares one (`of`)."""

    @classmethod
    def of(cls, transformer: nn.Module, layout: BlockLayout) -> StepCacheBackend:
        found = _ON_MODEL.get(transformer)
        if found is None:
            found = _ON_MODEL[transformer] = cls(transformer, layout)
        return found

    def __init__(self, transformer: nn.Module, layout: BlockLayout) -> None:
        # Held weakly: the registry keeps this backend while its transformer lives, so the
        # backend must not keep the transformer (one the residency evicts is then freed).
        self._transformer = ref(transformer)
        self.layout = layout
        self.blocks = cast(nn.ModuleList, getattr(transformer, layout.blocks))
        self._proxies = nn.ModuleList([_Proxy(self, i) for i in range(len(self.blocks))])
        self._scoped: list[RowScoped] = []
        self._pass: _Pass | None = None
        self._signature: inspect.Signature | None = None

    @property
    def transformer(self) -> nn.Module | None:
        """The transformer it caches (None once it is gone)."""
        return self._transformer()

    def add_row_scope(self, scoped: RowScoped) -> None:
        if not any(s is scoped for s in self._scoped):
            self._scoped.append(scoped)

    @contextmanager
    def forward(self, rows: Sequence[RowCache | None]) -> Generator[None]:
        """Within the block, the transformer's forward caches row `i` with `rows[i]` (None:
        that row always computes). A forward without a cached row is left alone."""
        transformer = self.transformer
        if transformer is None or len(self.blocks) < 2 or all(r is None for r in rows):
            yield
            return
        self._pass = _Pass(self, rows, _group())
        # nn.Module's own attribute assignment re-registers the submodule under that name.
        setattr(transformer, self.layout.blocks, self._proxies)
        try:
            yield
        finally:
            setattr(transformer, self.layout.blocks, self.blocks)
            self._pass = None

    @contextmanager
    def subset(self, rows: Sequence[int]) -> Generator[None]:
        """Within the block, the cached forward's batch is rows `rows` of the current one, each
        with its own cache, for a whole forward over them (`row_scopes.RowScoped`: a transformer
        that runs a batch in several calls of its own). Outside a cached forward, nothing."""
        current = self._pass
        if current is None:
            yield
            return
        self._pass = current.narrowed(rows)
        try:
            yield
        finally:
            self._pass = current

    def call_rows(self, rows: Sequence[int], block: nn.Module, args: Args) -> Any:
        with narrowed(self._scoped, rows):
            return block(*args)

    def signature(self) -> inspect.Signature:
        """The blocks' forward's parameters (one class of block a model)."""
        if self._signature is None:
            self._signature = inspect.signature(self.blocks[0].forward)
        return self._signature

    def route(self, index: int, args: Args, kwargs: Kwargs) -> Any:
        current = self._pass
        if current is None:
            return self.blocks[index](*args, **kwargs)
        return current.block(index, args, kwargs)


class _Proxy(nn.Module):
    """Block `index` while a cached forward runs (holds no parameters of its own)."""

    def __init__(self, backend: StepCacheBackend, index: int) -> None:
        super().__init__()
        self._route: Callable[[int, Args, Kwargs], Any] = backend.route
        self.index = index

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self._route(self.index, args, kwargs)


class _Row:
    """One row of the forward in progress."""

    def __init__(self, cache: RowCache | None, blocks: int) -> None:
        self.cache = cache
        front = back = 0
        if cache is not None:
            # One block always stays in the middle, whatever the model's depth.
            front = min(cache.settings.front_blocks, blocks - 1)
            back = min(cache.settings.back_blocks, blocks - 1 - front)
        self.front_end = front
        self.middle_end = blocks - back
        self.reuse = False
        self.front_out: torch.Tensor | None = None
        self.front_context: torch.Tensor | None = None  # a dual-stream block's second stream

    def skips(self, index: int) -> bool:
        return self.reuse and self.front_end <= index < self.middle_end


Streams = dict[int, torch.Tensor]  # a block's streams by their argument's position


class _Pass:
    """One cached forward: each block call goes through `block`."""

    def __init__(
        self, backend: StepCacheBackend, caches: Sequence[RowCache | None], group: Any
    ) -> None:
        self.layout = backend.layout
        self.backend = backend
        self.count = len(backend.blocks)
        self.rows = [_Row(c, self.count) for c in caches]
        self.group = group
        # A split shards the sequence: rows are compared whole and never trimmed there.
        self.trim = group is None
        self.start: torch.Tensor | None = None
        self.lengths: list[int] | None = None
        self.context_lengths: list[int] | None = None  # the second stream's real tokens

    def narrowed(self, rows: Sequence[int]) -> _Pass:
        """A pass over rows `rows` of this one's batch, from its first block (none has run)."""
        return _Pass(self.backend, [self.rows[j].cache for j in rows], self.group)

    def block(self, index: int, args: Args, kwargs: Kwargs) -> Any:
        args = self._positional(args, kwargs)
        streams = {at: cast(torch.Tensor, args[at]) for at in self.layout.streams}
        hidden = streams[self.layout.hidden]
        if index == 0:
            if hidden.shape[0] != len(self.rows):
                raise RuntimeError(
                    f"a cached block saw {hidden.shape[0]} rows in a forward of {len(self.rows)}"
                )
            self.start = hidden
            self.lengths = self._lengths(args, hidden)
            self.context_lengths = self._mask_lengths(args, self.layout.context_mask)
        if index > 0:
            deciding = [j for j, r in enumerate(self.rows) if r.cache and r.front_end == index]
            if deciding:
                self._decide(deciding, streams)
        streams = self._end_middle(streams, index)
        args = self._with_streams(args, streams)
        active = [j for j, r in enumerate(self.rows) if not r.skips(index)]
        real = self.backend.blocks[index]
        if len(active) == len(self.rows):
            out = self._streams_of(real(*args))
        elif not active:
            out = streams
        else:
            out = self._sub_batch(active, real, args, streams)
        if index == self.count - 1:
            out = self._end_middle(out, self.count)
        return self._returned(out)

    # -- the decision --------------------------------------------------------------------------

    def _decide(self, deciding: list[int], streams: Streams) -> None:
        hidden = streams[self.layout.hidden]
        start = self.start if self.start is not None else hidden
        if start.shape[1] != hidden.shape[1]:
            start = _shard_of(start, int(hidden.shape[1]), self.group)
        compared: list[int] = []
        sums: list[torch.Tensor] = []
        residuals: dict[int, torch.Tensor] = {}
        for j in deciding:
            row = self.rows[j]
            n = self._length(j, hidden)
            row.front_out = hidden[j, :n]
            if self.layout.context is not None:
                context = streams[self.layout.context]
                row.front_context = context[j, : self._context_length(j, context)]
            residual = hidden[j, :n] - start[j, :n]
            residuals[j] = residual
            cache = cast(RowCache, row.cache)
            if cache.owner is not self.backend:
                cache.front = cache.middle = cache.middle_context = None
                cache.owner = self.backend
            prev = cache.front
            if cache.may_reuse() and prev is not None and prev.shape == residual.shape:
                compared.append(j)
                sums.append(torch.stack([(residual - prev).abs().sum(), prev.abs().sum()]).float())
        diffs: list[list[float]] = []
        if sums:
            stacked = torch.stack(sums)
            if self.group is not None:
                import torch.distributed as dist

                cast(Any, dist).all_reduce(stacked, op=dist.ReduceOp.SUM, group=self.group)
            diffs = cast(list[list[float]], cast(Any, stacked).tolist())  # the one sync
        verdict = {
            j: (moved / ref if ref > 0 else float("inf"))
            for j, (moved, ref) in zip(compared, diffs, strict=True)
        }
        for j in deciding:
            row = self.rows[j]
            cache = cast(RowCache, row.cache)
            row.reuse = j in verdict and verdict[j] < cache.settings.threshold
            if not row.reuse:
                cache.front = residuals[j]
            cache.record(row.reuse, row.middle_end - row.front_end, self.count)

    def _end_middle(self, streams: Streams, index: int) -> Streams:
        """At the end of a row's middle blocks: a reusing row adds its cached residuals, a
        computing one keeps its new residuals (of each stream)."""
        ending = [
            j for j, r in enumerate(self.rows) if r.cache is not None and r.middle_end == index
        ]
        if not ending:
            return streams
        out = dict(streams)
        hidden_at, context_at = self.layout.hidden, self.layout.context
        for j in ending:
            row = self.rows[j]
            cache = cast(RowCache, row.cache)
            if row.front_out is None:  # its front blocks never ran: nothing to keep
                continue
            kept = [(hidden_at, row.front_out, "middle")]
            if context_at is not None and row.front_context is not None:
                kept.append((context_at, row.front_context, "middle_context"))
            for at, front, name in kept:
                n = front.shape[0]
                if row.reuse:
                    if out[at] is streams[at]:
                        out[at] = streams[at].clone()
                    out[at][j, :n] = front + cast(torch.Tensor, getattr(cache, name))
                else:
                    setattr(cache, name, streams[at][j, :n] - front)
        return out

    # -- rows --------------------------------------------------------------------------------

    def _sub_batch(
        self, active: list[int], real: nn.Module, args: Args, streams: Streams
    ) -> Streams:
        hidden = streams[self.layout.hidden]
        index = torch.tensor(active, device=hidden.device)
        length: int | None = None
        if self.trim and self.lengths is not None:
            length = max(self.lengths[j] for j in active)
        whole = length is not None and all(
            cast(list[int], self.lengths)[j] == length for j in active
        )
        sub = self._select(args, index, length, drop_mask=whole)
        got = self._streams_of(self.backend.call_rows(active, real, sub))
        out: Streams = {}
        for at, rows in got.items():
            out[at] = streams[at].clone()
            out[at][index, : rows.shape[1]] = rows
        return out

    def _select(
        self, args: Args, index: torch.Tensor, length: int | None, *, drop_mask: bool
    ) -> Args:
        picked = list(args)
        batch = len(self.rows)
        for position, has_tokens in self.layout.rows.items():
            value = picked[position] if position < len(picked) else None
            tokens = length if has_tokens else None
            if isinstance(value, torch.Tensor):
                picked[position] = _rows_of(value, index, batch, tokens)
            elif isinstance(value, tuple) and all(
                isinstance(v, torch.Tensor) for v in cast(tuple[Any, ...], value)
            ):  # e.g. rotary (cos, sin), each with rows first
                parts = cast(tuple[torch.Tensor, ...], value)
                picked[position] = tuple(_rows_of(v, index, batch, tokens) for v in parts)
        if drop_mask and self.layout.mask is not None and self.layout.mask < len(picked):
            picked[self.layout.mask] = None  # every picked row is whole: as a lone render
        return tuple(picked)

    def _lengths(self, args: Args, hidden: torch.Tensor) -> list[int] | None:
        """Each row's real tokens (None: every row fills the sequence)."""
        if not self.trim:
            return None
        return self._mask_lengths(args, self.layout.mask)

    def _mask_lengths(self, args: Args, at: int | None) -> list[int] | None:
        """Each row's real tokens by the mask at `at` (None: no mask, every row whole)."""
        mask = None if at is None or at >= len(args) else args[at]
        if not isinstance(mask, torch.Tensor):
            return None
        return cast(list[int], cast(Any, mask.sum(dim=1)).tolist())

    def _length(self, j: int, hidden: torch.Tensor) -> int:
        return int(hidden.shape[1]) if self.lengths is None else self.lengths[j]

    def _context_length(self, j: int, context: torch.Tensor) -> int:
        lengths = self.context_lengths
        return int(context.shape[1]) if lengths is None else lengths[j]

    def _positional(self, args: Args, kwargs: Kwargs) -> Args:
        """The block's arguments in order: a forward that passes them by keyword has them put in
        place, by the names its layout gives, else bound to the block's forward's parameters
        with their defaults filled in (LTX-2's, FLUX.2's, Krea 2's)."""
        if not kwargs:
            return args
        names = self.layout.names
        if not names:
            bound = self.backend.signature().bind(*args, **kwargs)
            bound.apply_defaults()
            if bound.kwargs:  # keyword-only parameters have no position a layout could name
                raise TypeError(f"a cached block takes keyword-only {sorted(bound.kwargs)}")
            return tuple(bound.args)
        unknown = set(kwargs) - set(names[len(args) :])
        if unknown:
            raise TypeError(
                "a cached block takes positional arguments, or the keywords its layout names; "
                f"got {sorted(unknown)}"
            )
        return (*args, *(kwargs.get(name) for name in names[len(args) :]))

    def _with_streams(self, args: Args, streams: Streams) -> Args:
        picked = list(args)
        for at, value in streams.items():
            picked[at] = value
        return tuple(picked)

    def _streams_of(self, result: Any) -> Streams:
        """A block's return value as its streams by position."""
        if not self.layout.returns:
            return {self.layout.hidden: cast(torch.Tensor, result)}
        return dict(zip(self.layout.returns, cast(tuple[torch.Tensor, ...], result), strict=True))

    def _returned(self, streams: Streams) -> Any:
        """The streams as the block returns them."""
        if not self.layout.returns:
            return streams[self.layout.hidden]
        return tuple(streams[at] for at in self.layout.returns)


def _rows_of(
    value: torch.Tensor, index: torch.Tensor, batch: int, tokens: int | None
) -> torch.Tensor:
    """Rows `index` of a row-carrying argument, its tokens trimmed to `tokens` (None: kept)."""
    value = value.index_select(0, _stacked_rows(index, batch, int(value.shape[0])))
    return value if tokens is None else value[:, :tokens]


def _stacked_rows(index: torch.Tensor, batch: int, rows: int) -> torch.Tensor:
    """The rows `index` picks of a tensor that stacks `rows // batch` copies of the batch's rows
    (Qwen-Image-Edit 2511's timestep embedding: the image's rows, then the references')."""
    copies = rows // batch if rows % batch == 0 else 1
    if copies <= 1:
        return index
    return torch.cat([index + k * batch for k in range(copies)])


def cached_forward(
    backend: StepCacheBackend | None, transformer: nn.Module, rows: Sequence[RowCache | None]
) -> AbstractContextManager[None]:
    """The block in which `transformer`'s forward caches `rows` (one per row of its batch): a
    no-op without a backend or without a cached row. A backend adopted on another module than
    the one that runs (a split engine's class put in its place, not adopted again) is an error:
    cached rows are never silently computed uncached."""
    if backend is None or not any(rows):
        return nullcontext()
    if backend.transformer is not transformer:
        raise RuntimeError(
            "the step cache was adopted on another transformer than the "
            f"{type(transformer).__name__} that runs: adopt it on the module in place"
        )
    return backend.forward(rows)


def _shard_of(full: torch.Tensor, tokens: int, group: Any) -> torch.Tensor:
    """This rank's part of the first block's input under a context-parallel split: cache-dit
    and diffusers shard a block's sequence evenly, `tensor.chunk(ranks, dim=1)[rank]`, inside
    the block, where the cache cannot see it."""
    import torch.distributed as dist

    parts = int(full.shape[1]) // tokens
    if group is None or parts * tokens != full.shape[1]:
        raise RuntimeError(f"the blocks see {tokens} of {full.shape[1]} tokens: not a split")
    return full.chunk(parts, dim=1)[dist.get_rank(group)]


def _group() -> Any:
    """The worker group's process group when this process is one of several ranks."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        return dist.group.WORLD
    return None
