"""Node runners: the behaviour half of a node, and the services they may be handed.

A runner receives a `NodeCall` (validated params with defaults merged and seeds resolved, plus the
values on its input ports) and returns a `NodeResult` (values for its output ports, and any takes it
wrote). Runners never pick a device and never run a denoise loop: model runners lower to components
and submit a `SampleJob` to the sampler.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from inline_core.runtime.context import ExecutionContext
from inline_core.takes import MediaRef, Take

# What the nodes fed by one of a node's outputs need of it, found at submit: the named variants of
# the value they read (e.g. the ways one file is read), or None: every variant (a consumer that
# does not say, or the run's own output). `graph/needs.py` gathers them against the edges.
Needs = frozenset[str] | None


@dataclass(frozen=True)
class NodeCall:
    ctx: ExecutionContext
    node_id: str
    params: Mapping[str, Any]
    # port -> value; a `multiple` port gets a list of values, an unwired optional port is absent.
    inputs: Mapping[str, Any]
    # What the runner's `check` returned at submit for this node (None: it returned nothing, or
    # the call did not come through validation).
    prepared: object | None = None


@dataclass(frozen=True)
class SubmitFacts:
    """What validation knows of a node at submit beyond its params: the inputs wired, the images
    wired in whose sizes are known (`sizes()`: read from their headers when asked), what the
    nodes wired into each input prepared (input name -> their `check` results, in edge order),
    and the registry's state the graph is checked under (`Registry.generation`: a runner that
    keeps what a check found keys it on this, so a registration checks again)."""

    wired: frozenset[str]
    sizes: Callable[[], Mapping[str, tuple[int, int]]]
    upstream: Mapping[str, Sequence[object]]
    generation: int = 0

    @classmethod
    def bare(cls, wired: Iterable[str] = ()) -> SubmitFacts:
        """A node checked on its own (scripts, tests): `wired` connected, no sizes known,
        nothing upstream."""
        return cls(frozenset(wired), lambda: {}, {})


@dataclass(frozen=True)
class NodeResult:
    outputs: Mapping[str, Any]
    takes: tuple[Take, ...] = field(default_factory=tuple[Take, ...])
    # False: its outputs are not a function of its inputs and params alone (a render changed by
    # interactions while it ran), so neither they nor anything downstream is cached.
    cacheable: bool = True


class CatalogView(Protocol):
    """What the graph layer needs of the model catalog (implemented in `models/catalog.py`)."""

    def options(self, category: str) -> list[str]:
        """File/folder names a picker for `category` may choose from."""
        ...

    def identity(self, category: str, name: str) -> str:
        """A string that changes when the named file is replaced (for cache keys)."""
        ...

    def path(self, category: str, name: str) -> Path:
        """The on-disk path of a listed entry (the name is checked against the listing)."""
        ...


class MediaResolver(Protocol):
    """Finds the bytes behind a `{"ref": "asset"|"take", "id"}` param."""

    def resolve(self, ref: MediaRef) -> Path:
        """Path of the referenced file; raises `NotFound` when there is none."""
        ...


class NodeRunner(ABC):
    """Base of every runner. Subclasses implement `run`; the hooks below have safe defaults."""

    # False for nodes whose output must never be reused across runs.
    cacheable: bool = True
    # True for nodes whose output depends on the run's step caching (`options.cache`): what the
    # run asked for then joins the node's cache key.
    caches_steps: bool = False
    # True for nodes that denoise over steps: one that does not cache them (`caches_steps`
    # False) refuses a run that asks for step caching, at submit.
    samples_steps: bool = False

    @abstractmethod
    def run(self, call: NodeCall) -> NodeResult:
        """Execute the node. Raise `Cancelled` (via `ctx.cancel`) to stop at a step boundary."""

    # Inputs whose value this node makes its output from in the variants its consumers read
    # (input name -> that output): what they need of the output, it needs of the input.
    needs_follow: Mapping[str, str] = {}

    def input_needs(
        self, params: Mapping[str, Any], facts: SubmitFacts, needs: Mapping[str, Needs]
    ) -> Mapping[str, Needs]:
        """What this node needs of the value on each input (input name -> `Needs`), given what
        the nodes it feeds need of each of its outputs (`needs`: output name -> `Needs`). An
        input left out needs every variant, so a node that does not say keeps what feeds it
        whole. By default, `needs_follow`'s."""
        return {port: needs.get(output) for port, output in self.needs_follow.items()}

    def fitted(self, prepared: object | None, needs: Mapping[str, Needs]) -> object | None:
        """What `check` prepared, cut to what the nodes it feeds need of its outputs (`needs`:
        output name -> `Needs`); it becomes the node's `NodeCall.prepared` and the input of
        `cache_identity`. By default, as it was."""
        return prepared

    def check_node(
        self, node_id: str, params: Mapping[str, Any], facts: SubmitFacts
    ) -> object | None:
        """The whole submit-time check of a node, once: by default `check_wired`, `check`,
        `check_sizes` and `check_upstream` in turn (the sizes read only for a runner that checks
        them). A runner that needs them all at once overrides this instead. What it returns is
        `check`'s: the node's `NodeCall.prepared`."""
        self.check_wired(node_id, params, facts.wired)
        found = self.check(node_id, params)
        if type(self).check_sizes is not NodeRunner.check_sizes:
            self.check_sizes(node_id, params, facts.sizes())
        if type(self).check_upstream is not NodeRunner.check_upstream:
            self.check_upstream(node_id, params, facts.upstream)
        return found

    def check(self, node_id: str, params: Mapping[str, Any]) -> object | None:
        """Submit-time readiness check beyond param types (e.g. model files present).

        Raise an `InlineError` (such as `ModelMissing`) to refuse the run with a 422. What it
        returns (e.g. the files it resolved) comes back as `NodeCall.prepared` and to
        `cache_identity`, so a run does that work once.
        """
        return None

    def check_wired(self, node_id: str, params: Mapping[str, Any], wired: frozenset[str]) -> None:
        """Submit-time check of params against which inputs are connected (e.g. a strength that
        leaves no step once an image is wired). Raise an `InlineError` to refuse the run."""
        return None

    def check_upstream(
        self, node_id: str, params: Mapping[str, Any], upstream: Mapping[str, Sequence[object]]
    ) -> None:
        """Submit-time check of what the nodes wired into each input prepared at submit
        (`upstream`: input name -> their `check` results, in edge order), e.g. a LoRA picked for
        another model. Raise an `InlineError` to refuse the run."""
        return None

    def image_size(self, params: Mapping[str, Any]) -> tuple[int, int] | None:
        """The (width, height) of the image this node outputs, where it is known at submit (a
        source reads its file's header); None: known only once it runs."""
        return None

    def check_sizes(
        self, node_id: str, params: Mapping[str, Any], sizes: Mapping[str, tuple[int, int]]
    ) -> None:
        """Submit-time check of the images wired in whose sizes are known at submit (`sizes`:
        input name -> (width, height)), e.g. a mask that must match its image. Raise an
        `InlineError` to refuse the run; a size known only at run is checked then."""
        return None

    def cache_identity(self, params: Mapping[str, Any], prepared: object | None = None) -> str:
        """Extra cache-key material: the identity of files this node reads beyond its params."""
        return ""
