"""How long the CPU's compute threads spin at a barrier before they sleep (libgomp's
GOMP_SPINCOUNT, or OMP_WAIT_POLICY), as health reports it.

PyTorch's CPU wheels run intra-op work on libgomp. A team member that reaches a barrier spins
there, by default 300,000 rounds (libgomp reckons 3 ms) before it sleeps, so that the next
parallel op finds it awake. That pays while every member has a core to itself, and the server
keeps libgomp's default: on a machine with some other work on it (load 1.5-4 on 2 cores) a
real-size seed-only render took 1.31-1.51 s with it, 1.50-1.82 s spinning 10,000 rounds and
1.71-2.15 s spinning 1,000 (`bench/openmp_spin.py`). When other work outnumbers the cores, a
preempted member arrives late at every barrier and the others spin out their rounds waiting for
it: at load 6-9 the same render took 7.6-14.1 s with the default, 3.1-4.2 s with 10,000 rounds.
A user who shares the machine that way sets GOMP_SPINCOUNT (README, "Launch flags"); libgomp
reads it once, when torch loads it, so it is set in the environment the server starts with.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

VARIABLE = "GOMP_SPINCOUNT"
POLICY = "OMP_WAIT_POLICY"
LIBGOMP_DEFAULT = 300_000  # the rounds with neither variable set
# OMP_WAIT_POLICY's rounds where GOMP_SPINCOUNT is unset (libgomp's env.c).
POLICY_ROUNDS = {"passive": 0, "active": 30_000_000_000}


@dataclass(frozen=True)
class SpinSetting:
    count: int | str  # the rounds, or GOMP_SPINCOUNT's own text where it is not a number
    source: str  # the variable that set it, or "libgomp" (its default)

    def to_json(self) -> dict[str, object]:
        return {"spinCount": self.count, "source": self.source}


def spin_setting(environ: Mapping[str, str] = os.environ) -> SpinSetting:
    """What this process's compute threads spin with, read from its environment."""
    if VARIABLE in environ:
        value = environ[VARIABLE].strip()
        return SpinSetting(int(value) if value.isdigit() else value, VARIABLE)
    policy = environ.get(POLICY, "").strip().lower()
    if policy in POLICY_ROUNDS:
        return SpinSetting(POLICY_ROUNDS[policy], POLICY)
    return SpinSetting(LIBGOMP_DEFAULT, "libgomp")
