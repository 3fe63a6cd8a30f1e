"""What health shows of compiled blocks, torch-free: the models whose blocks run compiled and,
per block class (dynamo keeps one cache per block code, shared by every block of the class), the
graphs compiled so far against the bound, the seconds they took, and whether one is running.

The first forward of a new shape class compiles (minutes on a CPU when nothing is cached, seconds
when inductor's cache in the data folder has it); `state` is "compiling" while one runs, so a
slow first render is visible, and the log says when each compile starts and ends. A compile that
fails where eager runs is "failed", with its error: its blocks run eager, and each take rendered
through them says so (`notes`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast


@dataclass
class BlockCompiles:
    """One block class's compiled graphs."""

    block: str
    recompile_limit: int
    graphs: int = 0  # graphs compiled (one per shape class: a batch of one, a mask or none)
    compile_seconds: float = 0.0
    compiling: int = 0  # compiles in progress
    compiled_calls: int = 0
    eager_calls: int = 0  # calls run eager: a hook inside the block (LoRA rows)
    # Why its compile failed where eager ran (`regional.CompiledForward`): every block of the
    # class runs eager from then on.
    failure: str | None = None

    @property
    def state(self) -> str:
        if self.failure is not None:
            return "failed"
        if self.compiling:
            return "compiling"
        return "warm" if self.graphs else "cold"

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "block": self.block,
            "state": self.state,
            "graphs": self.graphs,
            "recompileLimit": self.recompile_limit,
            "compileSeconds": round(self.compile_seconds, 1),
            "compiledCalls": self.compiled_calls,
            "eagerCalls": self.eager_calls,
        }
        if self.failure is not None:
            out["error"] = self.failure
        return out

    def note(self) -> dict[str, object]:
        """What a take says of this block class: compiled, or fell back to eager and why."""
        if self.failure is not None:
            return {"block": self.block, "ran": "eager", "error": self.failure}
        return {"block": self.block, "ran": "compiled"}


@dataclass
class CompileBoard:
    """Every compiled model of the process and its block classes (health's `models.compile`)."""

    cache_dir: str | None = None
    _models: dict[int, tuple[str, int]] = field(default_factory=dict[int, tuple[str, int]])
    _blocks: dict[str, BlockCompiles] = field(default_factory=dict[str, BlockCompiles])
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def block(self, name: str, recompile_limit: int) -> BlockCompiles:
        with self._lock:
            entry = self._blocks.get(name)
            if entry is None:
                entry = self._blocks[name] = BlockCompiles(name, recompile_limit)
            return entry

    def add_model(self, key: int, name: str, blocks: int) -> None:
        with self._lock:
            self._models[key] = (name, blocks)

    def remove_model(self, key: int) -> None:
        """Forget a model that was freed."""
        with self._lock:
            self._models.pop(key, None)

    def notes(self, blocks: Iterable[str]) -> list[dict[str, object]]:
        """What a render through the block classes `blocks` says of them (`BlockCompiles.note`),
        in name order."""
        with self._lock:
            entries = [self._blocks[name] for name in sorted(set(blocks)) if name in self._blocks]
        return [entry.note() for entry in entries]

    def all_notes(self) -> list[dict[str, object]]:
        """`notes` of every block class this process has run (a worker group's rank holds one
        stack: its own; only rank 0 decodes, so only its notes name the VAE's blocks)."""
        with self._lock:
            names = [n for n, e in self._blocks.items() if e.compiled_calls or e.eager_calls]
        return self.notes(names)

    def to_json(self) -> dict[str, object]:
        with self._lock:
            models = [{"model": name, "blocks": n} for name, n in self._models.values()]
            blocks = [entry.to_json() for entry in self._blocks.values()]
        return {"cacheDir": self.cache_dir, "models": models, "blocks": blocks}


BOARD = CompileBoard()


def merge_rank_notes(
    by_rank: Mapping[int, Sequence[Mapping[str, object]]],
) -> list[dict[str, object]]:
    """One note per block class from each rank's (`CompileBoard.all_notes`): compiled where every
    rank ran it compiled, else eager, with the ranks whose compile failed and the first's error."""
    seen: dict[str, dict[str, object]] = {}
    for rank in sorted(by_rank):
        for note in by_rank[rank]:
            block = str(note["block"])
            merged = seen.setdefault(block, {"block": block, "ran": "compiled", "ranks": 0})
            merged["ranks"] = cast(int, merged["ranks"]) + 1
            if note.get("ran") != "compiled":
                failed = cast(list[int], merged.setdefault("failedRanks", []))
                failed.append(rank)
                merged["ran"] = "eager"
                merged.setdefault("error", note.get("error"))
    return [seen[block] for block in sorted(seen)]
