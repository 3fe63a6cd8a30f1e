"""Crash bench: 20 `kill -9`s at random moments under concurrent submissions.

Run by hand: `python bench/crash_restarts.py [--kills 20] [--clients 8] [--seed 1]`. It starts
a real `python -m inline_core.server` on loopback with the test node `test/slow` (INLINE_PLUGINS),
lets clients submit runs with clientRunIds, kills the server with SIGKILL at a random moment,
restarts it, retries the POSTs the kill cut off (same clientRunId and body), waits for every
accepted run to finish, and checks after each restart: every accepted run done, the store holding
exactly the accepted runs, one take per run whose bytes match its sha256 and its seed, no take file
without a row, no temp file left, `PRAGMA integrity_check` ok.

Prints a table per kill and writes bench/results/crash_restarts.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.hardening.crash_harness import CrashHarness  # noqa: E402
from tests.server.server_support import LiveServer  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "crash_restarts.json"


def main() -> int:
    parser = argparse.ArgumentParser(description="kill -9 the server 20 times under load")
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    load_before = os.getloadavg()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="inline-crash-") as tmp:
        server = LiveServer(data_dir=Path(tmp) / "data", models_dir=Path(tmp) / "models")
        server.start()
        harness = CrashHarness(server, random.Random(args.seed), clients=args.clients)
        rows: list[dict[str, object]] = []
        print(
            f"{'kill':>4} {'at s':>6} {'accepted':>8} {'cut off':>7} {'(stored)':>8} "
            f"{'unfinished':>10} {'restart s':>9} {'drain s':>7} {'runs':>5} {'takes':>5} "
            f"{'integrity':>9}"
        )
        try:
            for index in range(args.kills):
                cycle = harness.kill_at_a_random_moment(index)
                totals = harness.verify()
                assert totals.temp_files == 0, "a temp file survived the restart"
                row = {**asdict(cycle), **asdict(totals)}
                rows.append(row)
                print(
                    f"{index + 1:>4} {cycle.kill_after_s:>6.2f} {cycle.accepted:>8} "
                    f"{cycle.cut_off:>7} {cycle.cut_off_committed:>8} "
                    f"{cycle.unfinished_at_kill:>10} {cycle.restart_s:>9.2f} "
                    f"{cycle.drain_s:>7.2f} {totals.runs:>5} {totals.takes:>5} "
                    f"{totals.integrity:>9}"
                )
        finally:
            server.close()
    final = rows[-1] if rows else {}
    summary = {
        "kills": len(rows),
        "clients": args.clients,
        "acceptedRuns": final.get("runs", 0),
        "takes": final.get("takes", 0),
        "runsUnfinishedAtAKill": sum(int(str(r["unfinished_at_kill"])) for r in rows),
        "postsCutOff": sum(int(str(r["cut_off"])) for r in rows),
        "postsCutOffButStored": sum(int(str(r["cut_off_committed"])) for r in rows),
        "lostRuns": 0,  # verify() asserts the store holds exactly the accepted runs
        "duplicateTakes": 0,  # verify() asserts one take per run and no unrecorded take file
        "integrity": "ok",
        "meanRestartS": round(sum(float(str(r["restart_s"])) for r in rows) / len(rows), 3),
        "maxDrainS": round(max(float(str(r["drain_s"])) for r in rows), 3),
        "wallS": round(time.perf_counter() - started, 1),
        "loadAverageBefore": [round(x, 2) for x in load_before],
        "loadAverageAfter": [round(x, 2) for x in os.getloadavg()],
        "machine": f"{platform.machine()}, {os.cpu_count()} cpus",
        "python": platform.python_version(),
    }
    print(json.dumps(summary, indent=2))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"summary": summary, "cycles": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
