"""The SDK's own error for references that do not have the wire form."""

from __future__ import annotations


class WireError(ValueError):
    """A reference that does not have the wire form (a bug on one side, reported as such)."""
