"""One rank of the command test: rank 0 shares every command of `commands()`, the other ranks
check they received each one equal to it. Run as `python command_ranks.py RANK WORLD PORT OUT`."""

from __future__ import annotations

import json
import os
import sys
from datetime import timedelta

from inline_core.parallel import torchdist
from inline_core.parallel.collective import (
    HEADER,
    STOP,
    TICK,
    Admit,
    Command,
    Forward,
    share_command,
)
from inline_core.parallel.protocol import Job


def commands() -> list[Command]:
    many = tuple(range(100, 100 + HEADER))  # more ids than the header holds: sent pickled
    return [
        TICK,
        Forward((3,), (3,)),
        Forward((7, 3, 9), (3, 7, 9, 11)),
        Forward((), ()),
        Forward(many, many),
        Admit(
            5,
            {"prompt": "a lighthouse", "steps": 8, "nested": {"k": [1, 2.5, None]}},
            {"image": bytes(range(256)) * 3},
        ),
        Job(6, {"prompt": "a cat", "seed": 7}, {"mask": b"\x00\xff"}),
        STOP,
    ]


def main() -> None:
    rank, world, port, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=port, RANK=str(rank), WORLD_SIZE=str(world)
    )
    torchdist.init("gloo", timedelta(seconds=60))
    received = [share_command(c if rank == 0 else None, None) for c in commands()]
    torchdist.barrier()  # nobody leaves while another rank still reads
    torchdist.destroy()
    with open(out, "w") as f:
        json.dump([repr(r) == repr(c) for r, c in zip(received, commands(), strict=True)], f)


if __name__ == "__main__":
    main()
