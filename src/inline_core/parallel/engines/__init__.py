"""Split engines: what shards a rank's transformer across the group. A new engine is a module
here, chosen in `split.py`."""

from inline_core.parallel.engines.base import NoSplit, SplitEngine, resolve_module
from inline_core.parallel.engines.split import SPLIT_METHODS, apply_split, choose_engine

__all__ = [
    "SPLIT_METHODS",
    "NoSplit",
    "SplitEngine",
    "apply_split",
    "choose_engine",
    "resolve_module",
]
