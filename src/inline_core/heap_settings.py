"""glibc's malloc settings for processes that render: large blocks are kept for reuse.

By default glibc maps a block of 128 KB or more on its own and unmaps it when freed (its threshold
then rises with the blocks freed, to 32 MB at most). A render allocates the same large buffers at
every step (activations, the GEMM library's packed weights), so a block unmapped after one step is
page-faulted in, zeroed, again at the next. Kept in the heap up to these sizes, a freed block is
reused instead:
- the server, with the real-size Z-Image set on a CPU (bench/real_size_cpu.py): a seed-only render
  took 58,000 page faults with the 4 MB threshold it had, 3,900 with these (the bare calls in the
  bench's own process: 300-500);
- a pack worker's 1024 px call: 9.9 ms of CPU, 3.8 ms with these.

Freed memory stays in the process up to the trim threshold; the server hands it back between runs
(`server.memory.HeapTrimmer`). The names are glibc's environment variables; a value the user set
in the environment wins.
"""

from __future__ import annotations

MB = 1024 * 1024

LARGE_BLOCK_MALLOC: dict[str, int] = {
    "MALLOC_MMAP_THRESHOLD_": 64 * MB,
    "MALLOC_TRIM_THRESHOLD_": 128 * MB,
}
