"""Loaded stacks: a family's parts kept resident, assembled into the objects the server drives.

One per server (`ModelRuntime.stacks()`). Every part loads through the server's one residency
cache, keyed by family, part, the files' identity and placement, so a node render and a primitive
graph on the same files share what is resident, and two families compete for one budget. Each
assembled object (a node's step pipeline, a denoiser, a text encoder, a VAE) is kept while its
parts stay resident, so concurrent requests on the same model reach the sampler as the same
pipeline and may share forwards; one holding a part the cache evicted is rebuilt, so the memory
can be freed.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from typing import Any, Protocol, TypeVar, cast

from inline_core.components.interfaces import TextEncoder
from inline_core.components.step import StepPipeline
from inline_core.contract.builder import (
    ADAPTER_CACHE,
    DENOISER,
    FUSED_COPIES,
    VAE,
    FamilyBuilder,
    Parts,
    placed_as,
)
from inline_core.contract.discovery import load_builder
from inline_core.contract.family import Family
from inline_core.contract.sources import DEFAULT, Sources
from inline_core.device.compile import CompileChoice
from inline_core.device.kernels import KernelChoice
from inline_core.device.policy import Placement
from inline_core.diffusion.adapter_counts import AdapterTotals
from inline_core.diffusion.cancel_blocks import watch_denoisers
from inline_core.diffusion.compile.regional import compile_decoders, compile_denoisers
from inline_core.diffusion.footprint import footprint
from inline_core.diffusion.kept_weights import KeptWeights
from inline_core.diffusion.placement import OffloadSwap
from inline_core.diffusion.residency import Footprint, ResidentCache
from inline_core.engine.assemble import assemble
from inline_core.engine.packing import packing_load
from inline_core.models.source import Source

T = TypeVar("T")

# A part's resident key and its load (the value and its footprint), decided once (`Stacks._plan`)
# per (family, part, its files' identity, the memory budget).
PartPlan = tuple[Hashable, Callable[[], tuple[Any, Footprint]]]
PlanKey = tuple[str, str, str, int | None]
# Plans kept, the least recently used forgotten first: every part of a few families' models, with
# room for files replaced and budgets changed (a plan forgotten is only planned again).
PLANS_KEPT = 128


class StackHost(Protocol):
    """What the stacks need of the server's model runtime (`engine/runtime.py`): where each
    role of a family runs, and the one residency cache every family shares."""

    residency: ResidentCache
    adapter_totals: AdapterTotals

    def placement(self, family: Family, role: str) -> Placement: ...

    def compile_choice(self, family: Family, role: str = ...) -> CompileChoice: ...

    def packed_linear_choice(self, family: Family) -> KernelChoice: ...

    def renders_in_progress(self) -> frozenset[Hashable]: ...


# Renders whose parts are remembered, for the no-thrash rule: the parts of a render, and of every
# render in progress, are not evicted for one another (a render's are forgotten when it ends;
# this bounds what renders never marked as in progress leave behind).
RENDERS_REMEMBERED = 64


def _sized(load: Callable[[], Any]) -> Callable[[], tuple[Any, Footprint]]:
    def run() -> tuple[Any, Footprint]:
        value = load()
        return value, footprint(value)

    return run


class Stacks:
    def __init__(self, runtime: StackHost) -> None:
        self.runtime = runtime
        self.swap = OffloadSwap()  # one per process: offloaded parts take turns on the device
        self._lock = threading.Lock()
        self._builders: dict[str, FamilyBuilder] = {}
        # (what, part keys) -> (the parts it holds, the object)
        self._memo: dict[tuple[Hashable, ...], tuple[tuple[object, ...], object]] = {}
        # (what, part keys) -> the block classes of its parts that run compiled
        self._compiled: dict[tuple[Hashable, ...], tuple[str, ...]] = {}
        # render (a run id) -> the resident keys it has used
        self._renders: OrderedDict[Hashable, set[Hashable]] = OrderedDict()
        self._storage = KeptWeights(lambda: runtime.residency.budget_bytes)
        # (family, part, its files' identity, the budget) -> its resident key and how it loads,
        # most recently used last (at most `PLANS_KEPT`)
        self._plans: OrderedDict[PlanKey, PartPlan] = OrderedDict()
        self._sharers: dict[Hashable, set[str]] = {}  # a shared part's key -> its families

    def builder(self, family: Family) -> FamilyBuilder:
        with self._lock:
            builder = self._builders.get(family.name)
            if builder is None:
                builder = self._builders[family.name] = load_builder(type(family))
            return builder

    # -- one part at a time: (resident key, loaded value) --------------------------------------

    def part(
        self, family: Family, name: str, source: Source | None, render: Hashable = None
    ) -> tuple[Hashable, Any]:
        """One part, resident; `render` (a run id) names the render it is for: the parts that
        render already uses are not evicted to make room for this one."""
        return self._part(family, name, source, self._held_by(render))

    def _part(
        self, family: Family, name: str, source: Source | None, held: set[Hashable]
    ) -> tuple[Hashable, Any]:
        identity = DEFAULT if source is None else source.identity()
        plan_key = (family.name, name, identity, self.runtime.residency.budget_bytes)
        with self._lock:
            plan = self._plans.get(plan_key)
            if plan is not None:
                self._plans.move_to_end(plan_key)
        if plan is None:
            plan = self._plan(family, name, source, identity)
            with self._lock:
                self._plans[plan_key] = plan
                while len(self._plans) > PLANS_KEPT:  # replaced files, other budgets: forgotten
                    self._plans.popitem(last=False)
        key, load = plan
        value = self.runtime.residency.get(key, load, keep=self._kept(held))
        held.add(key)
        return key, value

    def _plan(self, family: Family, name: str, source: Source | None, identity: str) -> PartPlan:
        """How one part loads, decided once per file identity: its placement (the device
        policy's for its role, with the storage its file's dtype keeps under the budget) and
        whether its linear layers are packed depend only on the files, the device policy (fixed
        once made) and the budget: a replaced file (a new identity) or another budget is planned
        again."""
        builder = self.builder(family)
        role = builder.roles.get(name)
        placement = None if role is None else self.runtime.placement(family, role)
        if placement is not None and source is not None:
            placement = self._storage.placement(f"{family.title} {name}", source, placement)
        # A part whose format families share (`FamilyBuilder.shared_parts`: a text encoder file
        # two families read) is keyed by that format, not the family: loaded once for both.
        owner = shared_owner(builder, name) or family.name
        key = (owner, name, identity, placement)
        if owner != family.name:
            with self._lock:
                self._sharers.setdefault(key, set()).add(family.name)
        packs = self.runtime.packed_linear_choice(family).enabled
        load = _sized(  # a packed copy is made at load, so the footprint counts it
            packing_load(
                lambda: builder.load(name, source, placement),
                role,
                placement,
                packs=packs,
                budget_bytes=self.runtime.residency.budget_bytes,
                name=f"{family.title} {name}",
            )
        )
        return key, load

    def _kept(self, held: set[Hashable]) -> frozenset[Hashable]:
        """What a load must not evict: the parts its render holds and those of every render in
        progress."""
        in_progress = self.runtime.renders_in_progress()
        with self._lock:
            others = [keys for render, keys in self._renders.items() if render in in_progress]
            return frozenset(held).union(*others)

    def shared(self) -> list[dict[str, Any]]:
        """Resident parts more than one family has used (health's residency `shared`)."""
        residency = self.runtime.residency
        with self._lock:
            sharers = [(key, sorted(names)) for key, names in self._sharers.items()]
        out: list[dict[str, Any]] = []
        for key, names in sharers:
            if len(names) < 2 or residency.peek(key) is None:
                continue
            owner, part, identity, _placement = cast(tuple[str, str, str, object], key)
            out.append({"format": owner, "part": part, "files": identity, "families": names})
        return out

    def plans(self) -> list[tuple[PlanKey, Hashable]]:
        """The parts planned now: each plan's key and the resident key it loads under, least
        recently used first."""
        with self._lock:
            return [(key, plan[0]) for key, plan in self._plans.items()]

    def kept_weights(self) -> list[dict[str, str]]:
        """The parts computing from weights kept in their file's dtype."""
        return self._storage.kept()

    def render_ended(self, render: Hashable) -> None:
        """Forget what a finished render held: its parts may be evicted for later renders."""
        with self._lock:
            self._renders.pop(render, None)

    def _held_by(self, render: Hashable) -> set[Hashable]:
        if render is None:
            return set()
        with self._lock:
            held = self._renders.get(render)
            if held is None:
                held = self._renders[render] = set()
                while len(self._renders) > RENDERS_REMEMBERED:
                    self._renders.popitem(last=False)
            return held

    # -- assembled objects ---------------------------------------------------------------------

    def pipeline(self, family: Family, sources: Sources, render: Hashable = None) -> StepPipeline:
        """A node's whole stack."""
        builder = self.builder(family)
        return self._assemble(
            "node",
            family,
            dict(sources.parts),
            lambda parts: assemble(builder, parts, "node"),
            render,
        )

    def denoiser(
        self,
        family: Family,
        transformer: Source,
        scheduler: Source | None,
        render: Hashable = None,
    ) -> StepPipeline:
        """The transformer and its schedule alone (the `sample` primitive's pipeline)."""
        builder = self.builder(family)
        named = {"transformer": transformer, "scheduler": scheduler}
        return self._assemble(
            "denoiser",
            family,
            named,
            lambda parts: assemble(builder, parts, "denoiser"),
            render,
        )

    def text_encoder(
        self, family: Family, encoder: Source, tokenizer: Source, render: Hashable = None
    ) -> TextEncoder:
        builder = self.builder(family)
        named = {"text_encoder": encoder, "tokenizer": tokenizer}
        return self._assemble(
            "text", family, named, lambda parts: builder.text_encoder(parts), render
        )

    def vae(self, family: Family, source: Source, render: Hashable = None) -> Any:
        builder = self.builder(family)
        named = {"vae": source}
        return self._assemble("vae", family, named, lambda parts: builder.vae(parts), render)

    def _placements(self, family: Family, builder: FamilyBuilder) -> dict[str, Any]:
        roles = sorted(set(builder.roles.values()))
        return {role: self.runtime.placement(family, role) for role in roles}

    def _assemble(
        self,
        what: str,
        family: Family,
        named: Mapping[str, Source | None],
        make: Callable[[Parts], T],
        render: Hashable = None,
    ) -> T:
        builder = self.builder(family)
        # A render without a name still keeps this object's own parts together.
        held = self._held_by(render) if render is not None else set[Hashable]()
        loaded = {name: self._part(family, name, source, held) for name, source in named.items()}
        keys = tuple(key for key, _value in loaded.values())
        values = tuple(value for _key, value in loaded.values())
        # Keyed by family too: a part two families share is assembled by each its own way.
        memo_key = (what, family.name, *keys)
        with self._lock:
            self._forget_evicted()
            known = self._memo.get(memo_key)
            if known is not None and all(a is b for a, b in zip(known[0], values, strict=True)):
                return cast(T, known[1])
        transformer_key = loaded["transformer"][0] if "transformer" in loaded else keys[0]
        parts = Parts(
            {name: value for name, (_key, value) in loaded.items()},
            self._placements(family, builder),
            self.swap,
            model_key=transformer_key,  # the weights, device and dtype of the forward
            extra={
                ADAPTER_CACHE: self._adapter_cache(frozenset(keys)),
                FUSED_COPIES: ResidentCopies(self.runtime.residency, self.runtime.adapter_totals),
            },
        )
        made = make(parts)
        denoisers = placed_as(DENOISER, builder.roles, parts)
        watch_denoisers(denoisers.values())  # a cancel stops a forward between its blocks
        compiled = compile_denoisers(denoisers, self.runtime.compile_choice(family), family.title)
        vaes = placed_as(VAE, builder.roles, parts)
        compiled += compile_decoders(vaes, self.runtime.compile_choice(family, VAE), family.title)
        with self._lock:
            self._memo[memo_key] = (values, made)
            self._compiled[memo_key] = compiled
        return made

    def compiled_classes(self, made: object) -> tuple[str, ...]:
        """The block classes that run compiled in an object these stacks assembled (none for
        one they did not)."""
        with self._lock:
            for key, (_values, known) in self._memo.items():
                if known is made:
                    return self._compiled.get(key, ())
        return ()

    def _adapter_cache(self, keep: frozenset[Hashable]) -> Callable[..., Any]:
        """Adapter weights load into the one residency cache, never evicting the parts of the
        object they adapt."""
        residency = self.runtime.residency

        def fetch(key: Hashable, load: Callable[[], tuple[Any, Footprint]]) -> Any:
            return residency.get(key, load, keep=keep)

        return fetch

    def _forget_evicted(self) -> None:
        """Drop objects holding a part the cache evicted, so its memory can be freed."""
        residency = self.runtime.residency
        for memo_key, (values, _made) in list(self._memo.items()):
            part_keys = memo_key[2:]
            if any(residency.peek(k) is not v for k, v in zip(part_keys, values, strict=True)):
                del self._memo[memo_key]
                self._compiled.pop(memo_key, None)


def shared_owner(builder: FamilyBuilder, part: str) -> str | None:
    """The format a builder shares `part` in with other families (None: its own)."""
    shared = cast(Mapping[str, str], getattr(builder, "shared_parts", {}))
    return shared.get(part)


class ResidentCopies:
    """Fused LoRA copies (`diffusion/adapters/fusing.py`) as residency entries: counted in the
    budget and evicted when memory is needed, put only where the budget has room for them, so
    no part of any render is ever evicted for one (the renders in progress included)."""

    def __init__(self, residency: ResidentCache, totals: AdapterTotals) -> None:
        self._residency = residency
        self.totals = totals

    def room(self) -> int | None:
        return self._residency.room()

    def put_if_room(self, key: Hashable, value: object, footprint: Footprint) -> bool:
        return self._residency.put_if_room(key, value, footprint)

    def peek(self, key: Hashable) -> object | None:
        return self._residency.peek(key)

    def drop(self, key: Hashable) -> bool:
        return self._residency.evict(key)
