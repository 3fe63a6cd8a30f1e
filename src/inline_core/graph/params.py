"""Param validation: check a node's params against its descriptor and normalise them.

Normalised params have every declared param present (defaults merged), integer numbers as `int`,
other numbers as `float`, media references as `{"ref", "id"}`. Normalising is idempotent, so a
stored graph validates again to the same params after a restart.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from typing import Any, cast

from inline_core.errors import InvalidGraph
from inline_core.graph.descriptor import SEED_MAX, NodeDescriptor, ParamSpec, ParamWidget
from inline_core.graph.runner import CatalogView
from inline_core.takes import MediaRef

MEDIA_REFS = ("asset", "take")
MAX_MEDIA_ID_LENGTH = 128
# Drawn seeds stay within a JavaScript number's exact integers, so a client that reads a take's
# params and sends the seed back sends the same seed. Clients may still pass any seed to SEED_MAX.
DRAWN_SEED_MAX = 2**53 - 1
_LISTED_OPTIONS = 12  # how many allowed values an error message lists
# A text param that declares no limit of its own still has one; so does a select's value (model
# names are relative paths, never this long).
DEFAULT_MAX_TEXT_LENGTH = 100_000
MAX_SELECT_LENGTH = 1024
_QUOTED_CHARS = 80  # how much of a client's value an error message quotes


def _quote(value: str) -> str:
    return repr(value if len(value) <= _QUOTED_CHARS else value[:_QUOTED_CHARS] + "...")


def _allowed(values: Sequence[str]) -> str:
    shown = ", ".join(repr(v) for v in values[:_LISTED_OPTIONS])
    more = len(values) - _LISTED_OPTIONS
    return f"{shown}, ... ({more} more)" if more > 0 else shown


class ModelNotListed(InvalidGraph):
    """A model picker names a file its catalog folder does not hold."""

    code = "model_missing"


def _fail(node_id: str, spec: ParamSpec, problem: str) -> InvalidGraph:
    return InvalidGraph(f"param {spec.name!r} {problem}", node_id=node_id)


def _text(spec: ParamSpec, node_id: str, value: object) -> str:
    if not isinstance(value, str):
        raise _fail(node_id, spec, f"must be a string, got {type(value).__name__}")
    limit = DEFAULT_MAX_TEXT_LENGTH if spec.max_length is None else spec.max_length
    if len(value) > limit:
        raise _fail(node_id, spec, f"is {len(value)} characters; the limit is {limit}")
    return value


def _whole(value: float) -> int | None:
    return int(value) if math.isfinite(value) and value.is_integer() else None


def _number(spec: ParamSpec, node_id: str, value: object) -> int | float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _fail(node_id, spec, f"must be a number, got {type(value).__name__}")
    if isinstance(value, float) and not math.isfinite(value):
        raise _fail(node_id, spec, "must be a finite number")
    number: int | float
    if spec.integer:
        whole = value if isinstance(value, int) else _whole(value)
        if whole is None:
            raise _fail(node_id, spec, f"must be a whole number, got {value!r}")
        number = whole
    else:
        number = float(value)
    if spec.minimum is not None and number < spec.minimum:
        raise _fail(node_id, spec, f"must be at least {spec.minimum:g}, got {number!r}")
    if spec.maximum is not None and number > spec.maximum:
        raise _fail(node_id, spec, f"must be at most {spec.maximum:g}, got {number!r}")
    # A whole step on an integer param is a hard constraint (e.g. sizes in multiples of 16);
    # fractional steps are only how far a slider moves.
    step = spec.step
    if spec.integer and step is not None and step > 1 and float(step).is_integer():
        base = int(spec.minimum) if spec.minimum is not None else 0
        if (int(number) - base) % int(step) != 0:
            raise _fail(node_id, spec, f"must be a multiple of {int(step)}, got {number!r}")
    return number


def _is_path(value: str) -> bool:
    """A name that reaches out of its folder or is not written as the catalog writes names:
    absolute, with `.` or `..` segments, empty segments or backslashes."""
    if value.startswith("/") or "\\" in value:
        return True
    return any(part in ("", ".", "..") for part in value.split("/"))


# A node's picker options in the order its node offers them (a family's own files first), or
# None where the node orders nothing: `Families.picker_options`.
PickerOrder = Callable[[str, str], list[str] | None]


def no_picker_order(_node_type: str, _category: str) -> list[str] | None:
    return None


def _select(
    spec: ParamSpec,
    node_id: str,
    value: object,
    catalog: CatalogView,
    node_type: str = "",
    picker_order: PickerOrder = no_picker_order,
) -> str:
    if not isinstance(value, str):
        raise _fail(node_id, spec, f"must be a string, got {type(value).__name__}")
    if len(value) > MAX_SELECT_LENGTH:
        raise _fail(node_id, spec, f"is {len(value)} characters; the limit is {MAX_SELECT_LENGTH}")
    if spec.options_from is not None:
        # Only a name the catalog lists is accepted: never a path of the client's choosing.
        listed = [n for category in spec.categories() for n in catalog.options(category)]
        folders = " or ".join(f"{c}/" for c in spec.categories())
        if value not in listed:
            if _is_path(value):  # not a name a folder could list: a malformed graph
                raise _fail(
                    node_id,
                    spec,
                    f"names {_quote(value)}: a file of {spec.options_from}/ "
                    "is named as the catalog lists it, never by a path",
                )
            if not listed:
                problem = f"names {_quote(value)}, but there are no models in {folders}"
            else:  # every file, the node's own first: the right one may sort last
                ordered = picker_order(node_type, spec.options_from) or []
                ordered += [name for name in listed if name not in ordered]
                shown = ", ".join(repr(v) for v in ordered)
                problem = f"names {_quote(value)}, which is not in {folders}; choose one of {shown}"
            raise ModelNotListed(f"param {spec.name!r} {problem}", node_id=node_id)
    elif spec.options and value not in spec.options:
        raise _fail(node_id, spec, f"is {_quote(value)}; choose one of {_allowed(spec.options)}")
    return value


def _seed(spec: ParamSpec, node_id: str, value: object) -> int:
    seed: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        seed = value
    elif isinstance(value, float):
        seed = _whole(value)
    if seed is None or not -1 <= seed <= SEED_MAX:
        raise _fail(node_id, spec, f"must be -1 (random) or a whole number 0..{SEED_MAX}")
    return seed


def _media(spec: ParamSpec, node_id: str, value: object) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise _fail(node_id, spec, 'must be an object {"ref": "asset" | "take", "id": ...}')
    ref_obj = cast(Mapping[str, object], value)
    extra = set(ref_obj) - {"ref", "id"}
    if extra:
        raise _fail(node_id, spec, f"has unknown keys [{_allowed(sorted(extra))}]")
    ref, ref_id = ref_obj.get("ref"), ref_obj.get("id")
    if ref not in MEDIA_REFS:
        shown = _quote(ref) if isinstance(ref, str) else type(ref).__name__
        raise _fail(node_id, spec, f"'ref' must be one of {', '.join(MEDIA_REFS)}, got {shown}")
    if not isinstance(ref_id, str) or not ref_id or len(ref_id) > MAX_MEDIA_ID_LENGTH:
        raise _fail(
            node_id, spec, f"'id' must be a non-empty string of at most {MAX_MEDIA_ID_LENGTH} chars"
        )
    return {"ref": cast(str, ref), "id": ref_id}


def _check_value(
    spec: ParamSpec,
    node_id: str,
    value: object,
    catalog: CatalogView,
    node_type: str,
    picker_order: PickerOrder,
) -> Any:
    match spec.widget:
        case ParamWidget.TEXT | ParamWidget.TEXTAREA:
            return _text(spec, node_id, value)
        case ParamWidget.NUMBER:
            return _number(spec, node_id, value)
        case ParamWidget.BOOLEAN:
            if not isinstance(value, bool):
                raise _fail(node_id, spec, f"must be true or false, got {type(value).__name__}")
            return value
        case ParamWidget.SELECT:
            return _select(spec, node_id, value, catalog, node_type, picker_order)
        case ParamWidget.SEED:
            return _seed(spec, node_id, value)
        case ParamWidget.MEDIA:
            return _media(spec, node_id, value)


def normalize_params(
    descriptor: NodeDescriptor,
    node_id: str,
    params: Mapping[str, Any],
    catalog: CatalogView,
    picker_order: PickerOrder = no_picker_order,
) -> dict[str, Any]:
    """Validate `params` for a node of `descriptor`'s type; return them normalised.

    Raises `InvalidGraph` naming the node and the param for an unknown param, a missing required
    one, or a value of the wrong type or out of range. A `null` value means "use the default".
    """
    known = {spec.name for spec in descriptor.params}
    unknown = sorted(set(params) - known)
    if unknown:
        allowed = ", ".join(sorted(known)) or "none"
        raise InvalidGraph(
            f"unknown params [{_allowed([n[:_QUOTED_CHARS] for n in unknown])}] for "
            f"{descriptor.type} (it takes: {allowed})",
            node_id=node_id,
        )
    out: dict[str, Any] = {}
    for spec in descriptor.params:
        value = params.get(spec.name)
        if value == "" and spec.options_from is not None:
            value = None  # an empty model picker means "choose for me", as null does
        if value is None:
            value = spec.default
        if value is None:
            if spec.required:
                raise _fail(node_id, spec, "is required")
            out[spec.name] = None
            continue
        out[spec.name] = _check_value(spec, node_id, value, catalog, descriptor.type, picker_order)
    return out


def resolve_seeds(
    descriptor: NodeDescriptor, params: Mapping[str, Any], rng: random.Random
) -> dict[str, Any]:
    """Replace each seed of -1 (random) with a drawn seed, so the stored graph reproduces."""
    out = dict(params)
    for spec in descriptor.params:
        if spec.widget == ParamWidget.SEED and out.get(spec.name) == -1:
            out[spec.name] = rng.randint(0, DRAWN_SEED_MAX)
    return out


def media_ref(value: Mapping[str, Any]) -> MediaRef:
    """The `MediaRef` behind a normalised media param."""
    return MediaRef(ref="take" if value["ref"] == "take" else "asset", id=str(value["id"]))


def seed_params(descriptor: NodeDescriptor) -> frozenset[str]:
    """The names of a node's seed params (widget `SEED`): what changes render to render."""
    return frozenset(spec.name for spec in descriptor.params if spec.widget == ParamWidget.SEED)


class CheckParams(Mapping[str, Any]):
    """A node's params as a submit check sees them: without its seeds. A seed is neither listed
    nor readable (`view["seed"]` raises `KeyError`, `view.get("seed")` is None), so what a check
    finds from this view holds for every seed, and may be kept across renders that change only
    the seed (`key()`: every other param, frozen)."""

    __slots__ = ("_params", "_seeds", "_key")

    def __init__(self, params: Mapping[str, Any], seeds: frozenset[str]) -> None:
        self._params = {name: v for name, v in params.items() if name not in seeds}
        self._seeds = seeds
        self._key: Hashable | None = None

    def __getitem__(self, name: str) -> Any:
        if name in self._seeds:
            raise KeyError(f"{name!r} is a seed, which a submit check never reads")
        return self._params[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._params)

    def __len__(self) -> int:
        return len(self._params)

    def key(self) -> Hashable:
        """Every param but the seeds, in their order, with each value's type (`1` is not
        `True`), made hashable: a normalised node's params come in its descriptor's order, so
        the same params make the same key."""
        if self._key is None:
            values = self._params.values()
            flat = tuple(self._params.items()), tuple(map(type, values))
            try:
                hash(flat)
                self._key = flat
            except TypeError:  # a media reference (a dict) or a list among them
                self._key = tuple((name, _frozen(v)) for name, v in self._params.items())
        return self._key


def _frozen(value: object) -> Hashable:
    if isinstance(value, Mapping):
        items = cast(Mapping[object, object], value).items()
        return ("map", tuple(sorted(((str(k), _frozen(v)) for k, v in items), key=lambda i: i[0])))
    if isinstance(value, list | tuple):
        return ("seq", tuple(_frozen(v) for v in cast(Sequence[object], value)))
    return (type(value).__name__, cast(Hashable, value))
