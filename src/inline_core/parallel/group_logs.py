"""A group's logs: torchrun's own, and each rank's stdout and stderr in files of its own.

torchrun (`--log-dir`, `--redirects 3`) writes rank r's streams to
`<rank dir>/<run id>_<random>/attempt_0/<r>/{stdout,stderr}.log`. Having them apart is what lets a
failure name a rank's own last error rather than whichever rank printed last. The end that goes to
the server's log prefixes every line with where it came from.
"""

from __future__ import annotations

from pathlib import Path

from inline_core.parallel.launch import last_exception_line, log_size, read_tail

STREAMS = ("stderr", "stdout")  # a rank's errors are looked for in this order


class GroupLogs:
    def __init__(self, folder: Path, world_size: int) -> None:
        self.launcher = folder / "group.log"
        self.rank_dir = folder / "ranks"
        self.world_size = world_size
        self._marks: dict[Path, int] = {}  # where the current job's part of each file begins

    def rank_file(self, rank: int, stream: str) -> Path | None:
        found = sorted(self.rank_dir.glob(f"*/attempt_*/{rank}/{stream}.log"))
        return found[-1] if found else None

    def mark(self) -> None:
        """From now on, only what is written from here is the current job's."""
        self._marks = {path: log_size(path) for path in self._files()}

    def last_error(self, rank: int) -> str | None:
        """The last `SomeError: ...` line that `rank` itself wrote in the current job."""
        for stream in STREAMS:
            path = self.rank_file(rank, stream)
            if path is None:
                continue
            line = last_exception_line(read_tail(path, limit=4000, since=self._since(path)))
            if line:
                return line
        return None

    def first_error(self) -> str | None:
        """Without a rank known to have failed first: the lowest rank's error, else torchrun's."""
        for rank in range(self.world_size):
            line = self.last_error(rank)
            if line:
                return line
        return last_exception_line(
            read_tail(self.launcher, limit=4000, since=self._since(self.launcher))
        )

    def end(self, limit: int = 3000) -> str:
        """The end of every log (all jobs), each line prefixed with its source."""
        parts = [_prefixed("[torchrun] ", read_tail(self.launcher, limit))]
        for rank in range(self.world_size):
            for stream in STREAMS:
                path = self.rank_file(rank, stream)
                tag = f"[rank {rank}] " if stream == "stderr" else f"[rank {rank} stdout] "
                parts.append(_prefixed(tag, read_tail(path, limit) if path else ""))
        return "\n".join(part for part in parts if part)

    def _files(self) -> list[Path]:
        ranks = [self.rank_file(r, s) for r in range(self.world_size) for s in STREAMS]
        return [self.launcher, *(path for path in ranks if path is not None)]

    def _since(self, path: Path) -> int:
        return self._marks.get(path, 0)  # a file first written during this job: all of it


def _prefixed(tag: str, text: str) -> str:
    return "\n".join(tag + line for line in text.strip().splitlines())
