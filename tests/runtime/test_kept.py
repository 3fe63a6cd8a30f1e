"""`Kept` works a value out once per key, reads it back after, drops the least recently used past
its bound, and refuses a bound that holds nothing."""

from __future__ import annotations

import pytest

from inline_core.kept import Kept


def test_a_value_is_worked_out_once_and_the_least_recently_used_goes_first() -> None:
    kept = Kept[str, int](2)
    calls: list[str] = []

    def make(key: str, value: int) -> int:
        calls.append(key)
        return value

    assert kept.get("a", lambda: make("a", 1)) == 1
    assert kept.get("b", lambda: make("b", 2)) == 2
    assert kept.get("a", lambda: make("a", 9)) == 1  # read back: "b" is now the oldest
    assert kept.get("c", lambda: make("c", 3)) == 3
    assert len(kept) == 2 and kept.made == 3
    assert kept.get("a", lambda: make("a", 9)) == 1
    assert kept.get("b", lambda: make("b", 4)) == 4  # dropped, worked out again
    assert calls == ["a", "b", "c", "b"]
    kept.clear()
    assert len(kept) == 0


def test_a_bound_that_holds_nothing_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        Kept[str, int](0)
