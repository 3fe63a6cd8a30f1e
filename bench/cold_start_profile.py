"""Where a prompt change's time goes after a cold start against a warm one (issue 38), profiled.

    flock /tmp/inline-realsize.lock .venv/bin/python bench/cold_start_profile.py \
        [--models DIR] [--changes 2] [--starts cold,warm] [--rate 25] [--dtype float32]
        [--src DIR] [--out FILE] [--no-perf]

On the real-size Z-Image set (`bench/real_size_cpu.py`), per start (cold: the set's files dropped
from the page cache first, `posix_fadvise`; warm: as the previous start left them), one server
renders the set's workflow once (the load) and then `--changes` prompt changes. For each prompt
change: its time, the server's major and minor page faults over it, the set's files' pages in the
page cache before and after (`fincore`), and a py-spy profile of the server (non-blocking, so
it is not paused) split into phases by the frames it holds: text encode, denoise, VAE decode,
take encode. After the load: the server's mappings of each weight file (`/proc/PID/smaps`:
resident, anonymous, huge-page mapped), its anonymous memory and its threads. Prints a table
with the load average; writes bench/results/cold_start_profile.json (the raw profiles in a
folder beside it).
`--src` runs the server from another checkout's `src` (a before/after row, side by side).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT), str(ROOT / "bench")]
OUT = ROOT / "bench" / "results" / "cold_start_profile.json"
MIB = 1024**2

# A sample's phase: the first of these its stack holds, innermost frames first.
PHASES = (
    ("text encode", ("transformers/models/qwen3", "text_encoder", "encode_prompt")),
    ("denoise", ("transformer_z_image", "denoise_step")),
    ("vae decode", ("autoencoder_kl", "vae", "post_decode")),
    ("take encode", ("PIL/", "png", "takes")),
)


def phase_of(stack: str) -> str:
    frames = stack.split(";")[::-1]
    for frame in frames:
        for name, marks in PHASES:
            if any(mark in frame for mark in marks):
                return name
    return "other"


def profile_phases(raw: Path, rate: int) -> dict[str, float]:
    """Seconds of samples per phase in a py-spy `--format raw` file (stack count per line)."""
    counts: Counter[str] = Counter()
    if raw.exists():
        for line in raw.read_text(errors="replace").splitlines():
            stack, _, count = line.rpartition(" ")
            if count.isdigit():
                counts[phase_of(stack)] += int(count)
    return {name: round(n / rate, 2) for name, n in sorted(counts.items())}


def faults(pid: int) -> tuple[int, int]:
    """(minor, major) page faults of `pid` so far, its threads included."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return int(fields[7]), int(fields[9])


def cached_mib(models: Path) -> dict[str, int]:
    """Each weight file's pages in the page cache, MiB (util-linux `fincore`)."""
    result: dict[str, int] = {}
    for path in sorted(models.rglob("*.safetensors")):
        out = subprocess.run(
            ["fincore", "--bytes", "--noheadings", "--output", "RES", str(path)],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.split()
        result[path.name] = int(out[0]) // MIB if out else -1
    return result


def mappings(pid: int, models: Path) -> dict[str, dict[str, int]]:
    """Per weight file, the server's mappings of it summed (smaps, MiB): size, resident,
    anonymous (copied-on-write), PMD-mapped."""
    result: dict[str, dict[str, int]] = {}
    current: dict[str, int] | None = None
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        parts = line.split()
        if "-" in parts[0] and len(parts) >= 5 and not parts[0].endswith(":"):
            path = parts[5] if len(parts) > 5 else ""
            current = None
            if path.startswith(str(models)):
                current = result.setdefault(Path(path).name, Counter())
                current["maps"] += 1
            continue
        if current is not None and parts[0] in (
            "Size:",
            "Rss:",
            "Anonymous:",
            "FilePmdMapped:",
            "Referenced:",
        ):
            current[parts[0][:-1]] += int(parts[1]) // 1024
    return {name: dict(values) for name, values in result.items()}


def status(pid: int) -> dict[str, int]:
    fields: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("RssAnon", "RssFile", "Threads", "VmHWM"):
            number = int(value.split()[0])
            fields[key] = number if key == "Threads" else number // 1024
    return fields


VMSTAT = (
    "pgfault",
    "pgmajfault",
    "pgscan_kswapd",
    "pgscan_direct",
    "allocstall_normal",
    "allocstall_movable",
    "compact_stall",
    "workingset_refault_file",
    "pgactivate",
    "pgdeactivate",
    "thp_fault_alloc",
)


def vmstat() -> dict[str, int]:
    """The machine's reclaim and fault counters (/proc/vmstat)."""
    fields = dict(line.split() for line in Path("/proc/vmstat").read_text().splitlines())
    return {key: int(fields.get(key, 0)) for key in VMSTAT}


def cpu_times(pid: int) -> dict[str, float]:
    """Seconds the server's threads ran in user and kernel mode, and waited for a CPU."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    tick = os.sysconf("SC_CLK_TCK")
    waited = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            waited += int((task / "schedstat").read_text().split()[1])
        except (OSError, IndexError):
            pass
    return {
        "user": int(fields[11]) / tick,
        "sys": int(fields[12]) / tick,
        "runqWait": waited / 1e9,
        **machine_cpu(),
    }


def machine_cpu() -> dict[str, float]:
    """Seconds all CPUs spent busy (any process) and stolen by the host (/proc/stat)."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    tick = os.sysconf("SC_CLK_TCK")
    user, nice, system, _idle, _iowait, irq, softirq, steal = values[:8]
    return {
        "machineBusy": (user + nice + system + irq + softirq) / tick,
        "steal": steal / tick,
    }


def process_cpu() -> dict[str, float]:
    """Every process's CPU seconds so far, by "pid name" (kernel threads included)."""
    tick = os.sysconf("SC_CLK_TCK")
    result: dict[str, float] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        name = text[text.index("(") + 1 : text.rindex(")")]
        fields = text.rpartition(")")[2].split()
        result[f"{stat.parent.name} {name}"] = (int(fields[11]) + int(fields[12])) / tick
    return result


def top_consumers(after: dict[str, float], before: dict[str, float], n: int = 6) -> list[str]:
    """The processes that took the most CPU between two `process_cpu` snapshots."""
    used = {key: after[key] - before.get(key, 0.0) for key in after}
    return [
        f"{key}: {value:.1f}s" for key, value in sorted(used.items(), key=lambda kv: -kv[1])[:n]
    ]


def delta(after: dict[str, Any], before: dict[str, Any]) -> dict[str, float]:
    return {key: round(after[key] - before[key], 2) for key in after}


def perf_top(data: Path, lines: int = 25) -> list[str]:
    """The hottest symbols of a `perf record` file, with their share."""
    out = subprocess.run(
        [
            "perf",
            "report",
            "-i",
            str(data),
            "--stdio",
            "--sort",
            "dso,sym",
            "--percent-limit",
            "0.7",
        ],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    return [line.strip() for line in out.splitlines() if line.strip() and not line.startswith("#")][
        :lines
    ]


def meminfo() -> dict[str, int]:
    fields: dict[str, int] = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("MemFree", "MemAvailable", "Cached", "Active(file)", "Inactive(file)"):
            fields[key] = int(value.split()[0]) // 1024
    return fields


def one_start(
    models: Path,
    start: str,
    changes: int,
    rate: int,
    dtype: str,
    spy_dir: Path,
    src: Path,
    with_perf: bool,
) -> dict[str, Any]:
    from real_size_cpu import drop_cached, render, server

    if start == "cold":
        drop_cached(models)
    row: dict[str, Any] = {"start": start, "cachedAtStartMib": cached_mib(models)}
    env = {
        "INLINE_DTYPE": dtype,
        "GOMP_SPINCOUNT": "0",
        "OMP_WAIT_POLICY": "passive",
        "PYTHONPATH": str(src),
    }
    with server(models, env) as (base, proc):
        pid = proc.pid
        row["firstS"] = round(render(base, f"a lighthouse, {start}", 1), 1)
        row["afterLoad"] = {
            "mappingsMib": mappings(pid, models),
            "status": status(pid),
            "faults": faults(pid),
            "cachedMib": cached_mib(models),
            "meminfoMib": meminfo(),
        }
        changes_done: list[dict[str, Any]] = []
        row["changes"] = changes_done
        for i in range(changes):
            raw = spy_dir / f"{start}-{i}.txt"
            spy = subprocess.Popen(
                ["py-spy", "record", "--pid", str(pid), "--rate", str(rate), "--nonblocking"]
                + ["--format", "raw", "--output", str(raw)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            perf_data = spy_dir / f"{start}-{i}.perf"
            tools = [spy]
            if with_perf:  # perf itself takes about 10 s of CPU per change here
                tools.append(
                    subprocess.Popen(
                        ["perf", "record", "-F", "49", "-p", str(pid), "-o", str(perf_data)],
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                    )
                )
            time.sleep(1.0)  # py-spy and perf attached before the POST
            minor0, major0 = faults(pid)
            cpu0, vm0, procs0 = cpu_times(pid), vmstat(), process_cpu()
            cached0 = cached_mib(models)
            seconds = render(base, f"a lighthouse on a cliff, {start} change {i}", 2 + i)
            minor1, major1 = faults(pid)
            cpu1, vm1, procs1 = cpu_times(pid), vmstat(), process_cpu()
            for tool in tools:
                tool.send_signal(signal.SIGINT)
                tool.wait(60)
            changes_done.append(
                {
                    "s": round(seconds, 1),
                    "minorFaults": minor1 - minor0,
                    "majorFaults": major1 - major0,
                    "cachedBeforeMib": cached0,
                    "cachedAfterMib": cached_mib(models),
                    "phasesS": profile_phases(raw, rate),
                    "cpuS": delta(cpu1, cpu0),
                    "vmstat": delta(vm1, vm0),
                    "perfTop": perf_top(perf_data) if with_perf else [],
                    "topProcesses": top_consumers(procs1, procs0),
                    "status": status(pid),
                    "meminfoMib": meminfo(),
                }
            )
            print(start, json.dumps(changes_done[-1]), flush=True)
        row["end"] = {"mappingsMib": mappings(pid, models), "status": status(pid)}
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--models", type=Path, default=Path(tempfile.gettempdir()) / "inline-real-size-set"
    )
    parser.add_argument("--changes", type=int, default=2)
    parser.add_argument("--starts", default="cold,warm")
    parser.add_argument("--rate", type=int, default=25)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--src", type=Path, default=ROOT / "src", help="the server's code")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--no-perf", action="store_true", help="py-spy only (perf costs CPU)")
    args = parser.parse_args()
    from real_size_cpu import build_set

    build_set(args.models)
    spy_dir = args.out.parent / f"{args.out.stem}_profiles"
    spy_dir.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()
    print(f"{os.cpu_count()} CPUs, {args.dtype}, {args.src}, load {load[0]:.1f}", flush=True)
    rows = [
        one_start(
            args.models,
            start,
            args.changes,
            args.rate,
            args.dtype,
            spy_dir,
            args.src,
            not args.no_perf,
        )
        for start in args.starts.split(",")
    ]
    end = os.getloadavg()
    print(
        f"{'start':6s} {'first s':>8s} {'change s':>9s} {'user s':>7s} {'sys s':>6s}"
        f" {'runq s':>7s} {'others s':>8s} {'steal':>5s} {'major':>6s} {'minor':>8s}  phases s"
    )
    for row in rows:
        for change in row["changes"]:
            phases = " ".join(f"{k}={v}" for k, v in change["phasesS"].items())
            cpu = change["cpuS"]
            others = cpu["machineBusy"] - cpu["user"] - cpu["sys"]  # other processes' CPU
            print(
                f"{row['start']:6s} {row['firstS']:8.1f} {change['s']:9.1f}"
                f" {change['cpuS']['user']:7.1f} {change['cpuS']['sys']:6.1f}"
                f" {change['cpuS']['runqWait']:7.1f} {others:8.1f} {change['cpuS']['steal']:5.1f}"
                f" {change['majorFaults']:6d} {change['minorFaults']:8d}  {phases}"
            )
    print(f"load {load[0]:.1f} at the start, {end[0]:.1f} at the end")
    body = {
        "cpus": os.cpu_count(),
        "dtype": args.dtype,
        "src": str(args.src),
        "load": [load, end],
        "rows": rows,
    }
    args.out.write_text(json.dumps(body, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
