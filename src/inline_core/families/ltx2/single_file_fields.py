"""Typed reads of one section of the LTX-2 single file's config JSON, each failure naming the
field by its path in the JSON (torch-free)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

_UNSET: Any = object()


class SingleFileError(ValueError):
    """Why an all-in-one LTX-2 file cannot be read (the caller names the file)."""


class Fields:
    def __init__(self, values: Mapping[str, Any], path: str) -> None:
        self.values, self.path = values, path

    def get(self, name: str, default: Any = None) -> Any:
        return self.values.get(name, default)

    def _value(self, name: str, default: Any, kind: str) -> Any:
        value = self.values.get(name, default)
        if value is _UNSET:
            raise SingleFileError(f"its config has no {self.path}.{name} ({kind})")
        return value

    def _wrong(self, name: str, kind: str, value: Any) -> SingleFileError:
        return SingleFileError(f"its config's {self.path}.{name} is not {kind}: {value!r}")

    def integer(self, name: str, default: Any = _UNSET) -> int:
        value = self._value(name, default, "a whole number")
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool):
            raise self._wrong(name, "a whole number", value)
        return value

    def number(self, name: str, default: Any = _UNSET) -> float:
        value = self._value(name, default, "a number")
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise self._wrong(name, "a number", value)
        return float(value)

    def boolean(self, name: str, default: Any = _UNSET) -> bool:
        value = self._value(name, default, "true or false")
        if not isinstance(value, bool):
            raise self._wrong(name, "true or false", value)
        return value

    def text(self, name: str, default: Any = _UNSET) -> str:
        value = self._value(name, default, "a string")
        if not isinstance(value, str):
            raise self._wrong(name, "a string", value)
        return value

    def ints(self, name: str, at_least: int = 1) -> list[int]:
        value = self._value(name, _UNSET, "a list of whole numbers")
        items = cast(list[Any], value) if isinstance(value, list) else None
        if items is None or len(items) < at_least or not all(isinstance(v, int) for v in items):
            raise self._wrong(name, f"a list of at least {at_least} whole numbers", value)
        return [int(v) for v in items]

    def section(self, name: str) -> Fields:
        value = self._value(name, _UNSET, "an object")
        if not isinstance(value, dict):
            raise self._wrong(name, "an object", value)
        return Fields(cast(dict[str, Any], value), f"{self.path}.{name}")

    def expect(self, name: str, released: Any) -> None:
        """A field other than the released layout is refused, not read as it."""
        value = self.values.get(name, released)
        if value != released:
            raise SingleFileError(
                f"its config's {self.path}.{name} is {value!r}: diffusers' LTX-2 classes "
                f"build {released!r} only"
            )
