"""One thread computes: the intra-op thread counts of a CPU server (imports torch).

PyTorch's CPU wheels run their intra-op work on libgomp (OpenMP). Every thread that runs a
parallel op gets a team of its own (the thread and its workers), and the team lives as long as
the thread. Once libgomp manages more threads than there are CPUs, it stops spinning at its
barriers (100 spins instead of 300,000) and its workers sleep and wake at every one.

So a server that ran its model work on several threads (the step loop, the run workers' encodes
and decodes, the preview worker) slowed every forward down, even with those threads idle. On the
real-size Z-Image set on 2 cores (`bench/real_size_cpu.py`), one call of the same pipeline took
1.42-1.48 s from one thread, and 1.60-1.94 s with a second team alive; its workers slept 1,000 to
2,400 times a call where they slept none with one team. Neither `OMP_WAIT_POLICY` nor
`GOMP_SPINCOUNT` lifts the throttle.

On a CPU the server therefore does all of its model work on the step loop's thread
(`StepLoopSampler(phases="loop")`, `ModelRuntime.compute`), and every other thread computes on one
thread, which opens no team. `claim_compute_thread` runs first on the loop thread.
"""

from __future__ import annotations

import threading

import torch

# The intra-op threads torch would give a thread (OMP_NUM_THREADS, else the cores), read at the
# first import, before this module lowers the default.
COMPUTE_THREADS = torch.get_num_threads()


def claim_compute_thread() -> None:
    """Give this thread every intra-op thread, and make one thread the default for every thread
    that has not computed yet."""
    # torch sets a thread's count from its process-wide default at the thread's first op: read
    # it once so that this thread's own count is the one set here, whatever the default becomes.
    torch.get_num_threads()
    torch.set_num_threads(COMPUTE_THREADS)
    # `set_num_threads` sets the caller's count and the default at once; a helper thread
    # lowers the default without touching this thread's count.
    lower = threading.Thread(target=_one_thread, name="inline-one-thread-default")
    lower.start()
    lower.join()


def _one_thread() -> None:
    torch.get_num_threads()
    torch.set_num_threads(1)
