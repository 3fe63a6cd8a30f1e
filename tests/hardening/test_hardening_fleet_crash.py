"""Three real servers on loopback sharing one PostgreSQL store and one take folder, 8 clients
submitting, a server killed with SIGKILL every few seconds and restarted, 10 kills in all: every
accepted run finishes, nothing is lost or doubled, no take is written twice, and the event history
shows no run executed on two servers at once (fleet_crash.py has the checks). Ten kills already
land on held runs, have them taken over, and catch some run twice (the asserts below); the bench
(bench/fleet.py) kills for as long as it is asked to."""

from __future__ import annotations

import random
from pathlib import Path

from fleet_crash import FleetCrash

from tests.postgres_cluster import PostgresCluster
from tests.server.server_support import running_fleet

KILLS = 10
SERVERS = 3
# Short leases keep the test short: a killed server's runs are taken over after about 2 s.
# Retries are generous: a run may be caught by more than one kill in a row.
FLEET_ENV = {"INLINE_LEASE_TIMEOUT_S": "2", "INLINE_MAX_RETRIES": "10", "INLINE_RUN_WORKERS": "8"}


def test_killing_servers_of_a_fleet_loses_nothing_doubles_nothing_overlaps_nothing(
    tmp_path: Path, postgres_cluster: PostgresCluster
) -> None:
    url = postgres_cluster.new_database()
    with running_fleet(tmp_path, url, SERVERS, FLEET_ENV) as servers:
        crash = FleetCrash(servers, random.Random(18), clients=8)
        crash.run(kills=KILLS)
        crash.wait_all_finished()
        totals = crash.verify()
    assert len(crash.kills) == KILLS
    assert totals.store.statuses == {"done": totals.runs} and totals.runs > 0
    # The kills landed on live work, and other servers took that work over.
    assert sum(k.held for k in crash.kills) > 0
    assert totals.taken_over > 0
    assert sum(n for tries, n in totals.attempts.items() if tries > 1) > 0
