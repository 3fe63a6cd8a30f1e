"""Step caching as a run asks for it (torch-free): DBCache's settings, checked at submit.

DBCache (cache-dit's "dual block cache") always computes a transformer's first `front_blocks`
blocks, compares their residual with the one of the request's last computed step (relative L1),
and when it moved less than `threshold` it skips the middle blocks and adds their residual from
that step instead. The first `warmup` steps always compute, and at most `max_consecutive` steps
in a row reuse. The last `back_blocks` blocks always compute too. The mechanism, kept per request
inside a batched forward, is `diffusion/stepcache/`.

A run gives `options.cache` (`{"method": "dbcache", ...}` or `{"method": "none"}`); without it
the device policy chooses (`DevicePolicy.step_cache`). Cached output is an approximation, so the
settings a render used are recorded in its take's params and are part of its node cache key.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, cast

from inline_core.errors import InvalidRequest

DBCACHE = "dbcache"
NONE = "none"
CACHE_METHODS: tuple[str, ...] = (NONE, DBCACHE)


@dataclass(frozen=True)
class StepCacheSettings:
    """One render's DBCache settings (cache-dit's defaults: F8B0, threshold 0.08, 8 warmup)."""

    threshold: float = 0.08
    warmup: int = 8
    front_blocks: int = 8
    back_blocks: int = 0
    max_consecutive: int = 3
    method: str = DBCACHE

    def to_json(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "threshold": self.threshold,
            "warmup": self.warmup,
            "frontBlocks": self.front_blocks,
            "backBlocks": self.back_blocks,
            "maxConsecutive": self.max_consecutive,
        }


# (JSON name, field, lowest, highest, integer only)
_FIELDS: tuple[tuple[str, str, float, float, bool], ...] = (
    ("threshold", "threshold", 0.0, 1.0, False),
    ("warmup", "warmup", 0, 1000, True),
    ("frontBlocks", "front_blocks", 1, 256, True),
    ("backBlocks", "back_blocks", 0, 256, True),
    ("maxConsecutive", "max_consecutive", 1, 1000, True),
)
_NAMES = ("method", *(name for name, *_rest in _FIELDS))


def cache_option_schema() -> dict[str, Any]:
    """`options.cache` as a JSON schema, for the API's description."""
    properties: dict[str, Any] = {"method": {"type": "string", "enum": list(CACHE_METHODS)}}
    for name, _field, low, high, integer in _FIELDS:
        kind = "integer" if integer else "number"
        properties[name] = {"type": kind, "minimum": low, "maximum": high}
    return {"type": "object", "properties": properties, "additionalProperties": False}


def parse_cache_option(raw: object) -> StepCacheSettings | None:
    """`options.cache` as the run stores it: settings, or None for `{"method": "none"}`.
    `InvalidRequest` names the field that is wrong."""
    if not isinstance(raw, dict):
        raise InvalidRequest(
            'option \'cache\' must be an object, e.g. {"method": "dbcache", "threshold": 0.08}'
        )
    given = cast(dict[str, Any], raw)
    unknown = sorted(k for k in given if k not in _NAMES)
    if unknown:
        raise InvalidRequest(
            f"unknown field {unknown[0]!r} in options.cache; its fields are {', '.join(_NAMES)}"
        )
    method = given.get("method")
    if method not in CACHE_METHODS:
        raise InvalidRequest(
            f"options.cache.method is {method!r}; choose one of {', '.join(CACHE_METHODS)}"
        )
    if method == NONE:
        extra = sorted(k for k in given if k != "method")
        if extra:
            raise InvalidRequest(f"options.cache.{extra[0]} has no meaning with method 'none'")
        return None
    values: dict[str, Any] = {}
    for name, attr, low, high, integer in _FIELDS:
        if name in given:
            values[attr] = _number(name, given[name], low, high, integer)
    return StepCacheSettings(**values)


def _number(name: str, value: object, low: float, high: float, integer: bool) -> float | int:
    kind = "an integer" if integer else "a number"
    ok = isinstance(value, int) if integer else isinstance(value, int | float)
    if not ok or isinstance(value, bool):
        raise InvalidRequest(f"options.cache.{name} must be {kind}, not {value!r}")
    number = cast(float, value)
    if number != number or not low <= number <= high:  # NaN compares unequal to itself
        raise InvalidRequest(
            f"options.cache.{name} is {value!r}; it must be between {_show(low)} and {_show(high)}"
        )
    return int(number) if integer else float(number)


def _show(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else str(bound)


@dataclass(frozen=True)
class StepCacheChoice:
    """What a run asked for: DBCache with its settings, off (`given` with no settings), or
    nothing (not `given`: the device policy chooses per render)."""

    given: bool = False
    settings: StepCacheSettings | None = None

    @cached_property
    def identity(self) -> str:
        """Its part of a node cache key (worked out once per choice)."""
        if not self.given:
            return "cache:policy"
        if self.settings is None:
            return "cache:none"
        return "cache:" + json.dumps(self.settings.to_json(), sort_keys=True)


# A run that asks for nothing: one shared value, so the common render works out no choice.
POLICY_CHOICE = StepCacheChoice()


# What a render's step cache did, summed over its rows (its prompt's and its negative's): the
# steps each row computed or reused, and the block calls it skipped or made.
COUNTS: tuple[str, ...] = ("computedSteps", "reusedSteps", "skippedBlocks", "computedBlocks")


def sum_counts(counts: Iterable[Mapping[str, int]]) -> dict[str, int]:
    totals = dict.fromkeys(COUNTS, 0)
    for one in counts:
        for name in COUNTS:
            totals[name] += int(one.get(name, 0))
    return totals


@dataclass(frozen=True)
class ReportedCounts:
    """A render's counts as the worker group's rank 0 reported them (the server's copy of a
    split request never held its cache)."""

    counts: Mapping[str, int]

    def stats(self) -> dict[str, int]:
        return sum_counts([self.counts])


@dataclass
class StepCacheTotals:
    """The server's cached renders and their counts since it started (`/v1/health`)."""

    renders: int = 0
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTS, 0))
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, counts: Mapping[str, int]) -> None:
        with self._lock:
            self.renders += 1
            self.counts = sum_counts([self.counts, counts])

    def to_json(self) -> dict[str, int]:
        with self._lock:
            return {"renders": self.renders, **self.counts}
