"""Counting a method's calls in a test while it still runs as before."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest


def count_calls(monkeypatch: pytest.MonkeyPatch, owner: object, name: str) -> list[object]:
    """Records each call of `owner.name` (its positional arguments), which still runs as before."""
    calls: list[object] = []
    real: Callable[..., Any] = getattr(owner, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)
    return calls
