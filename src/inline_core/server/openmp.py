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

Where the user set neither variable, the server chooses at start, before torch loads
(`choose_wait`): on CPUs already oversubscribed (a load average above `OVERSUBSCRIBED` times the
CPUs it may use) its threads wait passively, sleeping at once. Three fleet servers rendering the
kit Z-Image on 2 cores at load 14-22 (issue 41): one 384 px 4-step render took 9.4-37.7 s with the
default spin, 6.9-8.6 s spinning 10,000 rounds, 0.7-1.3 s passive. Below that load the default
stays (it was the fastest at load 1.5-4, above).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass

log = logging.getLogger(__name__)

VARIABLE = "GOMP_SPINCOUNT"
POLICY = "OMP_WAIT_POLICY"
LIBGOMP_DEFAULT = 300_000  # the rounds with neither variable set
# OMP_WAIT_POLICY's rounds where GOMP_SPINCOUNT is unset (libgomp's env.c).
POLICY_ROUNDS = {"passive": 0, "active": 30_000_000_000}
# Load (1-minute average) per usable CPU above which the server's threads wait passively.
OVERSUBSCRIBED = 2.0
# Why the server chose the wait itself ("load 17.3 on 2 CPUs"); None: it did not.
_chosen: str | None = None


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
        source = POLICY if _chosen is None else f"inline-core ({_chosen})"
        return SpinSetting(POLICY_ROUNDS[policy], source)
    return SpinSetting(LIBGOMP_DEFAULT, "libgomp")


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def choose_wait(
    environ: MutableMapping[str, str] = os.environ,
    load: Callable[[], float] = lambda: os.getloadavg()[0],
    cpus: Callable[[], int] = usable_cpus,
) -> str | None:
    """Before torch loads: where the user set neither variable and the CPUs are oversubscribed,
    make the compute threads wait passively (`OMP_WAIT_POLICY=passive`). Returns why, or None
    where the environment is left as it was."""
    global _chosen
    if VARIABLE in environ or POLICY in environ:
        return None
    try:
        now, count = load(), cpus()
    except OSError:  # no load average here
        return None
    if now <= OVERSUBSCRIBED * count:
        return None
    environ[POLICY] = "passive"
    _chosen = f"load {now:.1f} on {count} CPUs"
    log.info(
        "compute threads wait passively (%s=passive): %s at start; set %s or %s to choose",
        POLICY,
        _chosen,
        POLICY,
        VARIABLE,
    )
    return _chosen
