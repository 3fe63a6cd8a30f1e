"""Where a pack environment's packages come from: the same index pip is configured with.

pip reads its config files and `PIP_*` variables itself, so a pip-built environment resolves as
the server's own install did. uv reads neither, so the same settings are read from
`pip config list` and handed to uv as flags; uv is also told to pick the best match across all
indexes, as pip does (its own default stops at the first index that has the name at all).
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass

_LINE = re.compile(r"^(?P<scope>[^.]*)\.(?P<key>[\w-]+)='(?P<value>.*)'$")
CONFIG_TIMEOUT_S = 60


@dataclass(frozen=True)
class IndexOptions:
    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    constraints: tuple[str, ...] = ()
    no_index: bool = False

    def uv_flags(self) -> list[str]:
        flags = ["--index-strategy", "unsafe-best-match"]
        if self.no_index:
            flags.append("--no-index")
        if self.index_url:
            flags += ["--index-url", self.index_url]
        for url in self.extra_index_urls:
            flags += ["--extra-index-url", url]
        for link in self.find_links:
            flags += ["--find-links", link]
        for constraint in self.constraints:
            flags += ["--constraint", constraint]
        return flags


def parse_pip_config(listing: str) -> IndexOptions:
    """`pip config list` output as options; an `:env:` entry (a PIP_* variable) wins, as in pip."""
    found: dict[str, tuple[int, str]] = {}
    for line in listing.splitlines():
        match = _LINE.match(line.strip())
        if match is None:
            continue
        rank = 2 if match["scope"] == ":env:" else 1 if match["scope"] == "install" else 0
        key = match["key"]
        if key not in found or rank >= found[key][0]:
            found[key] = (rank, match["value"])

    def values(key: str) -> tuple[str, ...]:
        return tuple(found[key][1].split()) if key in found else ()

    index = values("index-url")
    return IndexOptions(
        index_url=index[0] if index else None,
        extra_index_urls=values("extra-index-url"),
        find_links=values("find-links"),
        constraints=values("constraint"),
        no_index=found.get("no-index", (0, ""))[1].lower() in {"1", "true", "yes", "on"},
    )


def pip_index_options() -> IndexOptions:
    """The index settings pip would use here (none when this environment has no pip)."""
    try:
        done = subprocess.run(
            [sys.executable, "-m", "pip", "config", "list"],
            capture_output=True,
            text=True,
            timeout=CONFIG_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return IndexOptions()
    return parse_pip_config(done.stdout) if done.returncode == 0 else IndexOptions()
