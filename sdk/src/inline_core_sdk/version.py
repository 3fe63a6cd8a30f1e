"""The SDK's own version (semver) and the version of the server <-> pack worker protocol."""

from __future__ import annotations

from importlib import metadata

DISTRIBUTION = "inline-core-sdk"
# The protocol's major version: a server talks only to workers that speak the same one.
PROTOCOL_VERSION = 2


def sdk_version() -> str:
    """The installed distribution's version (pyproject.toml is the one place it is written)."""
    return metadata.version(DISTRIBUTION)
