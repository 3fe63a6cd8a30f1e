"""`ModelRuntime`: the server-wide model resources, owned by the server and shared by every family.

- the device policy (built on first use; torch-free), which places every component;
- one residency cache of loaded components under the one memory budget the policy gives, so
  families compete for memory instead of each budgeting all of it;
- the loaded stacks built from it (`engine/stacks.py`, imported with torch on the first render);
- the renders in progress (`rendering`): the parts any of them holds are not evicted for another;
- the in-process step loop (`sampling`), and at most one worker group: its ranks hold the devices,
  so a split of another family or model restarts it with that one.

Families and the node runners get everything through this one object; none owns any of it.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable, Generator, Hashable, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar, cast

from inline_core.config import Config
from inline_core.contract.family import Family
from inline_core.contract.sources import Sources
from inline_core.device.compile import CompileChoice
from inline_core.device.kernels import KernelChoice
from inline_core.device.split import ModelParallelSupport, ParallelSpec
from inline_core.diffusion.adapter_counts import AdapterTotals
from inline_core.diffusion.compile.cache import keep_cache_in
from inline_core.diffusion.compile.progress import BOARD
from inline_core.diffusion.residency import ResidentCache
from inline_core.errors import InvalidRequest, Unavailable
from inline_core.models.source import Source
from inline_core.runtime.preview import PreviewImage, PreviewTarget, preview_duty
from inline_core.runtime.step_cache import StepCacheChoice, StepCacheSettings, StepCacheTotals
from inline_core.sampling.job import BatchedSampler, PreviewSink
from inline_core.sampling.previews import PreviewWorker

if TYPE_CHECKING:
    from inline_core.device import DevicePolicy, Placement
    from inline_core.diffusion.preview.renderer import PreviewRenderer
    from inline_core.engine.group import ModelGroup
    from inline_core.engine.stacks import Stacks

log = logging.getLogger(__name__)

MIB = 1024 * 1024
T = TypeVar("T")


class ModelRuntime:
    def __init__(
        self, config: Config, sampler: BatchedSampler, policy: DevicePolicy | None = None
    ) -> None:
        self.config = config
        self.sampler = sampler
        self.residency = ResidentCache()
        self._policy = policy
        self._budget_set = False
        self._lock = threading.Lock()
        self._stacks: Stacks | None = None
        self._rendering: Counter[Hashable] = Counter()
        self._splits: dict[tuple[str, str], ParallelSpec | None] = {}
        # (step-cache methods, steps) -> the device policy's default step caching (frozen)
        self._step_cache_defaults: dict[tuple[frozenset[str], int], StepCacheSettings | None] = {}
        self._group: ModelGroup | None = None
        self._closed = False
        self.previews = PreviewWorker()
        self.step_cache_totals = StepCacheTotals()  # every cached render's counts
        self.adapter_totals = AdapterTotals()  # how forwards applied their LoRAs
        self._renderer: PreviewRenderer | None = None
        if policy is not None:
            self._apply_budget(policy)

    # -- the device policy ---------------------------------------------------------------------

    def policy(self) -> DevicePolicy:
        with self._lock:
            if self._policy is None:
                from inline_core.device import policy_from_config

                self._policy = policy_from_config(self.config)
            policy = self._policy
        self._apply_budget(policy)
        return policy

    def _apply_budget(self, policy: DevicePolicy) -> None:
        with self._lock:
            if self._budget_set:
                return
            budget = policy.memory_budget_mb
            self.residency.budget_bytes = budget * MIB if budget > 0 else None
            self._budget_set = True

    def placement(self, family: Family, role: str) -> Placement:
        """Where `role` of `family` runs: a family whose activations overflow float16 in that
        role gets bfloat16 (or float32) instead; one trained in float16 gets it on a GPU."""
        caps = family.capabilities
        return self.policy().placement(
            role,
            fp16_safe=role not in caps.fp16_overflow,
            prefer_fp16=role in caps.fp16_preferred,
        )

    def compile_choice(self, family: Family, role: str = "denoiser") -> CompileChoice:
        """Whether `family`'s part placed as `role` (its denoiser, its VAE's decoder) runs its
        blocks compiled (the device policy's choice for its device class and the role's dtype);
        where it does, inductor's cache is in the data folder."""
        choice = self.policy().compile_for(family.name, self.placement(family, role).dtype)
        if choice.enabled:
            keep_cache_in(self.config.data_dir)
        return choice

    def packed_linear_choice(self, family: Family) -> KernelChoice:
        """Whether `family`'s denoiser computes its linear layers from weights packed at load
        (the device policy's choice for its device class and dtype)."""
        return self.policy().packed_linear_for(self.placement(family, "denoiser").dtype)

    def compile_notes(self, pipeline: object) -> list[dict[str, object]]:
        """What a render through `pipeline` (one the stacks assembled) says of its compiled
        blocks: each class compiled, or eager after its compile failed and why; none where
        nothing of it runs compiled."""
        with self._lock:
            stacks = self._stacks
        classes = () if stacks is None else stacks.compiled_classes(pipeline)
        return BOARD.notes(classes) if classes else []

    def step_cache_for(
        self, family: Family, choice: StepCacheChoice, steps: int
    ) -> StepCacheSettings | None:
        """A render's step caching: what its run asked for, else the device policy's default
        for its step count; None for a family whose pipelines adopt no step cache."""
        methods = family.capabilities.step_cache
        if not methods:
            return None
        if choice.given:
            settings = choice.settings
            return settings if settings is not None and settings.method in methods else None
        key = (methods, steps)  # the policy's default depends on these alone: asked once
        with self._lock:
            if key in self._step_cache_defaults:
                return self._step_cache_defaults[key]
        settings = self.policy().step_cache(methods, steps)
        with self._lock:
            self._step_cache_defaults[key] = settings
        return settings

    # -- loaded stacks -------------------------------------------------------------------------

    def compute(self, fn: Callable[[], T]) -> T:
        """Run a node's model work (an encode, a decode) where the sampler wants it: on a CPU, on
        the step loop's thread, so one thread does all of the process's compute (see
        `diffusion/threads.py` for why). A sampler without a say runs it here."""
        compute = cast(
            "Callable[[Callable[[], T]], T] | None", getattr(self.sampler, "compute", None)
        )
        return fn() if compute is None else compute(fn)

    def stacks(self) -> Stacks:
        """The resident stacks (imports torch and diffusers on first use; torch's attention
        kernels are then tried in the device policy's order)."""
        with self._lock:
            if self._stacks is not None:
                return self._stacks
        attention = self.policy().attention  # asked once, as the stacks are made
        with self._lock:
            if self._stacks is None:
                from inline_core.diffusion.compile.attention import use_attention
                from inline_core.engine.stacks import Stacks

                log.info("attention: torch SDPA tries %s", ", ".join(use_attention(attention)))
                self._stacks = Stacks(self)
            return self._stacks

    @contextmanager
    def rendering(self, render: Hashable) -> Generator[None]:
        """While one render (a run id) is in progress, what it has loaded is kept resident for
        every render: two runs in progress on models that together exceed the budget stay over
        it (with a warning) rather than evicting each other's parts between their steps and
        reloading them at the next run. Torch-free: it only marks the render."""
        with self._lock:
            self._rendering[render] += 1
        try:
            yield
        finally:
            with self._lock:
                self._rendering[render] -= 1
                ended = self._rendering[render] <= 0
                if ended:
                    del self._rendering[render]
                stacks = self._stacks
            if ended and stacks is not None:
                stacks.render_ended(render)

    def renders_in_progress(self) -> frozenset[Hashable]:
        with self._lock:
            return frozenset(self._rendering)

    # -- step previews -------------------------------------------------------------------------

    def preview_sink(
        self, target: PreviewTarget | None, run_id: str, node_id: str
    ) -> PreviewSink | None:
        """Where a node's step previews go (None: the run has them off). Rendered by the one
        preview worker, off the step loop; the renderer imports torch on first use."""
        if target is None or not target.enabled:
            return None
        renderer = self._preview_renderer()
        method, deliver = target.method, target.deliver

        def render(latents: Any, latent_format: str) -> Any:
            return renderer.render(method, latents, latent_format)

        def delivered(image: Any, step: int, step_count: int) -> None:
            deliver(PreviewImage(run_id, node_id, step, step_count, image))

        remote = {
            "method": method,
            "size": self.config.preview_size,
            "vaeApprox": str(self.config.models_dir / "vae_approx"),
        }
        return self.previews.channel(render, delivered, remote, preview_duty(method))

    def _preview_renderer(self) -> PreviewRenderer:
        with self._lock:
            if self._renderer is None:
                from inline_core.diffusion.preview.renderer import PreviewRenderer

                self._renderer = PreviewRenderer(
                    self.config.models_dir / "vae_approx", self.config.preview_size
                )
            return self._renderer

    # -- splitting across ranks ----------------------------------------------------------------

    def split_for(
        self, family: Family, transformer: Source | None, node_id: str | None = None
    ) -> ParallelSpec | None:
        """The split for renders of `family` with this transformer (None: in process), decided
        once per transformer from what the family supports and what the machine has."""
        key = (family.name, "default" if transformer is None else transformer.identity())
        with self._lock:
            if key in self._splits:
                return self._splits[key]
        support = family.split_support(transformer)
        policy = self.policy()
        if support is None or self.methods_not_served(support):
            split = None  # the family cannot be split (so): its renders stay in process
        else:
            try:
                split = policy.split_for(support)
            except InvalidRequest as exc:  # e.g. a Ulysses degree this model's heads do not allow
                raise InvalidRequest(exc.message, node_id=node_id) from exc
        with self._lock:
            self._splits[key] = split
        return split

    def refuse_if_split(
        self,
        family: Family,
        node_type: str,
        params: Mapping[str, Any],
        sources: Sources | None,
        node_id: str,
        images: Mapping[str, tuple[int, int] | None] | None = None,
    ) -> None:
        """At submit: a render (over `sources`, its files; None: a primitive's default model;
        `images`: its inputs wired in, with their sizes where known) whose model this server
        splits and that the family cannot run under that split (`Family.unsplittable`) is a 422
        saying why, before it is queued."""
        transformer = None if sources is None else sources.get("transformer")
        split = self.split_for(family, transformer, node_id)
        if split is None:
            return
        why = family.unsplittable(node_type, params, split, sources, images)
        if why is not None:
            raise InvalidRequest(why, node_id=node_id)

    def methods_not_served(self, support: ModelParallelSupport) -> frozenset[str]:
        """The methods of an explicit split that a family does not split with (empty: none)."""
        explicit = self.policy().settings.parallel
        if explicit is None or not explicit.is_split:
            return frozenset()
        return explicit.methods - support.methods

    def check_split(self, family: Family) -> bool:
        """At start-up: whether this family's renders run on the explicit split. One its default
        model cannot run (a Ulysses degree its heads do not divide) is an `InvalidRequest` (the
        server refuses to start); a family that cannot split at all, or not with the split's
        methods, renders in process, and the log says so (`register_families` refuses a split
        that no family can use)."""
        explicit = self._policy is not None and self._policy.settings.parallel is not None
        if not (self.config.parallel or explicit):
            return False
        sources = family.files.resolve(None).sources
        transformer = None if sources is None else sources.get("transformer")
        support = family.split_support(transformer)
        if support is None:
            log.warning("%s cannot be split across ranks: its renders run in process", family.title)
            return False
        unserved = self.methods_not_served(support)
        if unserved:
            log.warning(
                "%s cannot be split with %s (it splits with %s): its renders run in process",
                family.title,
                ", ".join(sorted(unserved)),
                ", ".join(sorted(support.methods)),
            )
            return False
        return self.split_for(family, transformer) is not None

    def refuse_unused_split(self, families: Sequence[Family]) -> None:
        """At start-up, after `check_split`: an explicit split that no family installed here can
        use is an `InvalidRequest` naming what the first family that splits at all splits with."""
        policy = self.policy()
        explicit = policy.settings.parallel
        if explicit is None or not explicit.is_split:
            return
        for family in families:
            sources = family.files.resolve(None).sources
            support = family.split_support(None if sources is None else sources.get("transformer"))
            if support is not None:
                policy.split_for(support)  # raises, naming the methods it splits with
                return

    def group(self, split: ParallelSpec) -> ModelGroup:
        """The worker group running `split`, launched on its first job (one group at a time)."""
        from inline_core.engine.group import ModelGroup

        cuda = self.policy().kind == "cuda"  # outside the lock: the policy takes it too
        with self._lock:
            if self._closed:
                raise Unavailable("the worker group is shut down")
            old = self._group
            if old is not None and old.split == split:
                return old
            group = ModelGroup.for_split(split, cuda=cuda)
            self._group = group
        if old is not None:
            old.close()
        return group

    # -- lifecycle -------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the worker group, if one was started (server shutdown)."""
        with self._lock:
            self._closed = True
            group, self._group = self._group, None
        if group is not None:
            group.close()
        self.previews.close()

    def stats(self) -> dict[str, Any]:
        """Residency counters (loads, hits, evictions, resident bytes) and the worker group's."""
        body: dict[str, Any] = self.residency.stats().to_json()
        stacks = self._stacks
        if stacks is not None and (kept := stacks.kept_weights()):
            body["keptWeights"] = kept  # parts computing from their file's dtype, mapped
        if stacks is not None and (shared := stacks.shared()):
            body["shared"] = shared  # parts loaded once for several families
        group = self._group
        if group is not None:
            body["workerGroup"] = group.stats()
        compiled = BOARD.to_json()
        if compiled["models"] or compiled["blocks"]:
            body["compile"] = compiled  # compiled blocks: graphs, compile time, warm or not
        return body
