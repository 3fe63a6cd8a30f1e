"""How one image's denoise is split across ranks (issue 6), chosen per model family.

`ParallelSpec` is the `INLINE_PARALLEL` value ("ulysses=2", "ulysses=2,ring=2", "off"); the
degrees multiply to the number of ranks. `choose_split` validates an explicit spec or picks one
from the GPU count, the interconnect and what the model family supports.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from inline_core.device.hardware import HardwareDescription
from inline_core.device.profile import Profile, choose_profile
from inline_core.errors import InvalidRequest

# Canonical order, used for printing a spec back.
METHODS: tuple[str, ...] = ("ulysses", "ring", "pipefusion")
_NO_SPLIT_WORDS = frozenset({"off", "none", "no", "0", "1"})


@dataclass(frozen=True)
class ParallelSpec:
    """Split degrees per method; empty means one process (no split)."""

    degrees: tuple[tuple[str, int], ...] = ()

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for method, degree in self.degrees:
            if method not in METHODS:
                raise ValueError(f"unknown parallel method {method!r}")
            if method in seen:
                raise ValueError(f"parallel method {method!r} given twice")
            if degree < 2:
                raise ValueError(f"parallel degree for {method} must be >= 2, got {degree}")
            seen.add(method)
        ordered = tuple(sorted(self.degrees, key=lambda item: METHODS.index(item[0])))
        object.__setattr__(self, "degrees", ordered)

    @property
    def sequence_ranks(self) -> int:
        """The ranks a token sequence is sharded over (Ulysses and Ring both shard it)."""
        return self.degree("ulysses") * self.degree("ring")

    @classmethod
    def of(cls, **degrees: int) -> ParallelSpec:
        """`ParallelSpec.of(ulysses=2, ring=2)`."""
        return cls(tuple(degrees.items()))

    @classmethod
    def parse(cls, text: str, *, source: str = "INLINE_PARALLEL") -> ParallelSpec:
        """Parse "ulysses=2,ring=2"; "off"/"none" asks for no split. Errors name what is allowed."""
        raw = text.strip().lower()
        if raw in _NO_SPLIT_WORDS:
            return cls()
        prefix = f"{source}={text!r}"
        known = ", ".join(METHODS)
        degrees: dict[str, int] = {}
        for part in raw.split(","):
            method, sep, value = (piece.strip() for piece in part.partition("="))
            if not sep or not method or not value:
                raise InvalidRequest(
                    f"{prefix}: expected method=degree pairs such as ulysses=2 or "
                    f"ulysses=2,ring=2 (methods: {known}), or off"
                )
            if method not in METHODS:
                raise InvalidRequest(f"{prefix}: unknown method {method!r}; methods: {known}")
            if method in degrees:
                raise InvalidRequest(f"{prefix}: {method} is given twice")
            try:
                degree = int(value)
            except ValueError:
                raise InvalidRequest(f"{prefix}: degree {value!r} is not an integer") from None
            if degree < 2:
                raise InvalidRequest(
                    f"{prefix}: a degree must be at least 2 (use {source}=off for no split)"
                )
            degrees[method] = degree
        return cls(tuple(degrees.items()))

    def degree(self, method: str) -> int:
        return dict(self.degrees).get(method, 1)

    @property
    def methods(self) -> frozenset[str]:
        return frozenset(method for method, _ in self.degrees)

    @property
    def world_size(self) -> int:
        """Ranks this split runs on: the product of the degrees."""
        return math.prod(degree for _, degree in self.degrees)

    @property
    def is_split(self) -> bool:
        return self.world_size > 1

    def __str__(self) -> str:
        return ",".join(f"{method}={degree}" for method, degree in self.degrees) or "off"


@dataclass(frozen=True)
class ModelParallelSupport:
    """What a model family can be split with, e.g. ulysses and ring over 30 attention heads."""

    family: str
    methods: frozenset[str]
    heads: int | None = None  # Ulysses shards attention heads, so its degree must divide this
    # Ulysses and Ring shard the token sequence evenly over their ranks. A family that pads its
    # sequences to multiples of this many tokens (e.g. 32) splits only over ranks dividing it;
    # any other count leaves a remainder that the engines refuse or attend to as if it were real.
    sequence_multiple: int | None = None
    # Whether Ulysses and Ring run together (the USP hybrid). A family whose attention is laid
    # out for one of them at a time says False: the automatic split then never combines them.
    ulysses_with_ring: bool = True

    def __post_init__(self) -> None:
        unknown = self.methods - set(METHODS)
        if unknown:
            raise ValueError(f"unknown parallel methods {sorted(unknown)} for {self.family}")

    @property
    def ulysses_degrees(self) -> tuple[int, ...]:
        """Allowed Ulysses degrees (> 1); empty when the heads are not known."""
        if self.heads is None:
            return ()
        return tuple(d for d in range(2, self.heads + 1) if self.heads % d == 0)

    def allows_ulysses(self, degree: int) -> bool:
        return self.heads is None or self.heads % degree == 0

    def allows_sequence_ranks(self, ranks: int) -> bool:
        return self.sequence_multiple is None or self.sequence_multiple % ranks == 0


def ranks_for(spec: ParallelSpec, hw: HardwareDescription, profile: Profile) -> int:
    """Ranks a split will launch: one per GPU, or on the cpu profile the spec's own product
    (CPU ranks over gloo)."""
    return spec.world_size if profile is Profile.CPU else hw.gpu_count


def check_ranks(spec: ParallelSpec, hw: HardwareDescription, profile: Profile) -> None:
    """An explicit split's degrees must multiply to the rank count it will launch."""
    if not spec.is_split:
        return
    ranks = ranks_for(spec, hw, profile)
    if spec.world_size != ranks:
        plural = "" if ranks == 1 else "s"
        raise InvalidRequest(
            f"INLINE_PARALLEL={spec} needs {spec.world_size} ranks (one per GPU) but found "
            f"{ranks} usable GPU{plural}: the degrees must multiply to the GPU count "
            "(CUDA_VISIBLE_DEVICES picks the GPUs), or set INLINE_PROFILE=cpu to run CPU ranks, "
            "or INLINE_PARALLEL=off"
        )


def check_support(spec: ParallelSpec, support: ModelParallelSupport) -> None:
    """An explicit split must use methods and degrees the model family supports."""
    allowed = ", ".join(m for m in METHODS if m in support.methods) or "none"
    unsupported = sorted(spec.methods - support.methods, key=METHODS.index)
    if unsupported:
        raise InvalidRequest(
            f"INLINE_PARALLEL={spec}: {support.family} cannot be split with "
            f"{', '.join(unsupported)}; supported methods: {allowed}"
        )
    sequence_ranks = spec.sequence_ranks
    if not support.allows_sequence_ranks(sequence_ranks):
        multiple = support.sequence_multiple or 1
        counts = ", ".join(str(n) for n in range(2, multiple + 1) if multiple % n == 0)
        raise InvalidRequest(
            f"INLINE_PARALLEL={spec}: {support.family} pads its token sequence to multiples of "
            f"{multiple}, so ulysses x ring must divide {multiple} ({sequence_ranks} does not); "
            f"allowed: {counts}"
        )
    ulysses = spec.degree("ulysses")
    if ulysses > 1 and not support.allows_ulysses(ulysses):
        degrees = ", ".join(str(d) for d in support.ulysses_degrees)
        raise InvalidRequest(
            f"INLINE_PARALLEL={spec}: a ulysses degree must divide the {support.heads} attention "
            f"heads of {support.family}; allowed ulysses degrees: {degrees}"
        )


def choose_split(
    hw: HardwareDescription,
    support: ModelParallelSupport,
    override: ParallelSpec | None = None,
    *,
    profile: Profile | None = None,
) -> ParallelSpec | None:
    """The split for one model family, or None to run in process (zero overhead).

    An explicit `override` is validated (rank count, methods, Ulysses degree) and raises
    `InvalidRequest` naming what is allowed. Without one, a split is picked only with two or more
    GPUs; CPU ranks are never started unless asked for. An automatic split may use fewer ranks
    than GPUs (a family whose sequence a larger count would not divide, or a Ulysses-only family
    whose heads no larger degree divides): launch `spec.world_size` ranks on the first GPUs.
    """
    profile = choose_profile(hw) if profile is None else profile
    if override is not None:
        if not override.is_split:
            return None
        check_ranks(override, hw, profile)
        check_support(override, support)
        return override
    if profile is Profile.CPU or hw.backend != "cuda" or hw.gpu_count < 2:
        return None
    ranks = max(n for n in range(1, hw.gpu_count + 1) if support.allows_sequence_ranks(n))
    if ranks < 2:
        return None
    spec = _auto_split(ranks, hw.nvlink, support)
    return spec if spec is not None and spec.is_split else None


def _auto_split(gpus: int, nvlink: bool, support: ModelParallelSupport) -> ParallelSpec | None:
    """Pick a split for `gpus` GPUs from what the family supports and the interconnect.

    Exact methods (Ulysses, Ring) come first: they reproduce the single-process render, while
    PipeFusion reuses one-step-stale activations and is a last resort.

    - NVLink: Ulysses. Its all-to-all of Q/K/V/O moves the least data per attention layer, and
      NVLink carries all-to-all at full speed. The largest degree dividing both the heads and the
      GPU count is used; any remaining factor goes to Ring (the USP hybrid).
    - PCIe: Ring. Its neighbour-to-neighbour K/V passes overlap with the blockwise attention
      compute, while Ulysses' all-to-all blocks every attention layer and, beyond two GPUs, has
      every GPU sending to every other through the shared PCIe root at once.

    A family that cannot run Ulysses and Ring together gets Ulysses only where its heads let
    it cover every GPU, else Ring over all of them: one group renders at a time, so a GPU that
    Ulysses leaves out would sit idle.
    """
    has = support.methods
    ulysses_first = nvlink or "ring" not in has
    if "ulysses" in has and ulysses_first:
        both = [d for d in range(gpus, 1, -1) if gpus % d == 0 and support.allows_ulysses(d)]
        hybrid = "ring" in has and support.ulysses_with_ring
        if both and (both[0] == gpus or hybrid):
            rest = gpus // both[0]
            if rest == 1:
                return ParallelSpec.of(ulysses=both[0])
            return ParallelSpec.of(ulysses=both[0], ring=rest)
        if "ring" not in has:
            # No Ring to absorb the remainder: use as many GPUs as the heads allow.
            fit = [d for d in range(gpus, 1, -1) if support.allows_ulysses(d)]
            if fit:
                return ParallelSpec.of(ulysses=fit[0])
    if "ring" in has:
        return ParallelSpec.of(ring=gpus)
    if "pipefusion" in has:
        return ParallelSpec.of(pipefusion=gpus)
    return None
