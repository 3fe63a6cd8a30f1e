"""What the real-size memory benches share: their files, their server, their measures, their report.

A family's real-size bench (`real_size_cpu.py` Z-Image, `qwen_image_real_size_cpu.py`,
`sdxl_real_size_cpu.py`, `flux2_real_size_cpu.py`, `krea2_real_size_cpu.py`) builds the files
ComfyUI loads for it at the published shapes, then renders through a real server and reads its
memory from /proc. Here:
- the files: `write_sparse_safetensors` (a real header, the data region a hole: no disk, written in
  seconds, yet every page the server maps is a real page of the page cache, so the memory is
  what the real files' would be; zeros compute as slowly as real weights), ComfyUI's fp8 layouts
  (`fp8_layers`), and the parts several families read (`qwen3_shapes`: Qwen3-4B is Z-Image's
  and FLUX.2 klein 4B's; `qwen_image_vae_tensors`: Qwen-Image's and Krea 2's VAE);
- the server: `server` (the CPU profile, optionally confined to a memory cgroup: `MemoryCage`),
  `run_graph` (POST to `run_done`), `RssPeaks` (peak anonymous and file-backed RSS, page faults);
- the measure: `measure_renders` (renders with new seeds, the first loads), `memory_rows`;
- the report: `bench_parser`, `run_memory_bench` (build, measure, table, JSON, exit status).

Every real-size render on a shared machine runs under one lock, so one set at a time holds
memory: `flock /tmp/inline-realsize.lock .venv/bin/python bench/<bench>.py`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Generator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import httpx
from websockets.sync.client import connect

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT), str(Path(__file__).resolve().parent)]
RESULTS = ROOT / "bench" / "results"

from server_process import start_server  # noqa: E402

from tests.page_cache import drop_from_page_cache  # noqa: E402

GIB = 1024**3
# One client for the whole run, as Inline Studio keeps one: making an httpx client builds an SSL
# context (30-160 ms here), which a per-render `httpx.post` would add to every server time.
HTTP = httpx.Client(timeout=60)
Row = tuple[str, object]

# -- the files -------------------------------------------------------------------------------------

Tensors = Mapping[str, tuple[tuple[int, ...], str]]  # name -> (shape, safetensors dtype)
ITEM_BYTES = {"F8_E4M3": 1, "U8": 1, "BF16": 2, "F16": 2, "F32": 4}
# ComfyUI's fp8 layouts: plain (`*_fp8_e4m3fn`), `scaled` (`*_fp8_scaled`: `scale_weight`,
# `scale_input`, the `scaled_fp8` marker) and `mixed` (`*_fp8mixed`, BFL's `-fp8`: per layer
# `weight_scale`, `input_scale` and a `comfy_quant` description).
FP8_LAYOUTS = ("plain", "scaled", "mixed")
QUANT_DESCRIPTION = b'{"format": "float8_e4m3fn", "full_precision_matrix_mult": true}'


def write_sparse_safetensors(path: Path, tensors: Tensors) -> None:
    """A safetensors file of `tensors`, all zeros: the header written, the data region a hole of
    its full length."""
    header: dict[str, Any] = {}
    offset = 0
    for name in sorted(tensors):
        shape, dtype = tensors[name]
        size = ITEM_BYTES[dtype] * math.prod(shape)
        header[name] = {
            "dtype": dtype,
            "shape": list(shape),
            "data_offsets": [offset, offset + size],
        }
        offset += size
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)  # the data starts 8-byte aligned
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as out:
        out.write(len(encoded).to_bytes(8, "little") + encoded)
        out.truncate(8 + len(encoded) + offset)


def fp8_layers(
    shapes: Mapping[str, tuple[int, ...]], *, scaled: bool, layout: str | None = None
) -> dict[str, Any]:
    """ComfyUI's fp8 layout of `shapes`: each linear layer's weight float8_e4m3fn, the rest
    bfloat16, with the scales of `layout` (`FP8_LAYOUTS`; `scaled` alone picks "scaled" or
    "plain"). The token embedding is not a linear layer's: it stays bfloat16."""
    layout = layout or ("scaled" if scaled else "plain")
    if layout not in FP8_LAYOUTS:
        raise ValueError(f"unknown fp8 layout {layout!r}; layouts: {', '.join(FP8_LAYOUTS)}")
    tensors: dict[str, Any] = {}
    for name, shape in shapes.items():
        layer = name.endswith(".weight") and len(shape) == 2 and "embed_tokens" not in name
        tensors[name] = (shape, "F8_E4M3" if layer else "BF16")
        if not layer:
            continue
        stem = name.removesuffix(".weight")
        if layout == "scaled":
            tensors[f"{stem}.scale_weight"] = ((), "F32")
            tensors[f"{stem}.scale_input"] = ((), "F32")
        elif layout == "mixed":
            tensors[f"{stem}.weight_scale"] = ((), "F32")
            tensors[f"{stem}.input_scale"] = ((), "F32")
            tensors[f"{stem}.comfy_quant"] = ((len(QUANT_DESCRIPTION),), "U8")
    if layout == "scaled":
        tensors["scaled_fp8"] = ((0,), "F8_E4M3")
    return tensors


def same_dtype(shapes: Mapping[str, tuple[int, ...]], dtype: str) -> dict[str, Any]:
    """`shapes` all stored in one safetensors dtype ("BF16", "F16")."""
    return {name: (shape, dtype) for name, shape in shapes.items()}


def file_bytes(*paths: Path) -> dict[str, float]:
    """Each file's length (sparse: the bytes it would hold)."""
    return {path.name: float(path.stat().st_size) for path in paths}


# Qwen3-4B: Z-Image's and FLUX.2 klein 4B's text encoder (`qwen_3_4b.safetensors`), and Krea 2's
# Qwen3-VL-4B's language model.
QWEN3_4B: dict[str, Any] = {
    "vocab_size": 151936,
    "hidden_size": 2560,
    "intermediate_size": 9728,
    "num_hidden_layers": 36,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "rms_norm_eps": 1e-6,
    "max_position_embeddings": 40960,
    "tie_word_embeddings": True,
}


def qwen3_shapes(config: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
    """A Qwen3 text encoder's tensors in ComfyUI's single-file naming (`model.` before the
    language model's; no `lm_head`)."""
    import torch

    from inline_core.diffusion.libs import transformers

    lib = transformers()
    qwen3 = lib.Qwen3Config(
        **config, rope_parameters={"rope_theta": 1_000_000.0, "rope_type": "default"}
    )
    with torch.device("meta"):
        model = lib.Qwen3Model(qwen3)
    return {f"model.{k}": tuple(v.shape) for k, v in model.state_dict().items()}


def qwen_image_vae_tensors() -> Tensors:
    """The published Qwen-Image VAE (base width 96) in ComfyUI's naming, bfloat16: the file
    Qwen-Image and Krea 2 decode with (`qwen_image_vae.safetensors`)."""
    import torch

    from inline_core.diffusion.formats import qwen_image_vae
    from inline_core.diffusion.libs import diffusers

    with torch.device("meta"):
        model = diffusers().AutoencoderKLQwenImage()  # its defaults are the published VAE's
    named = qwen_image_vae.to_original(dict(model.state_dict()))
    return {k: (tuple(v.shape), "BF16") for k, v in named.items()}


def fit_note(files: Mapping[str, float]) -> str | None:
    """Why a set cannot be held on this machine (None: its files fit in its RAM), for the table."""
    total = sum(files.values())
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if total <= ram:
        return None
    return (
        f"its files ({total / GIB:.1f} GiB) are larger than this machine's RAM "
        f"({ram / GIB:.1f} GiB): each render would read weights from disk again"
    )


# -- the server ------------------------------------------------------------------------------------


class RssPeaks:
    """Polls a process's anonymous and file-backed RSS (/proc/PID/status), keeping the peaks."""

    def __init__(self, pid: int, every_s: float = 0.02) -> None:
        self.pid, self.every_s = pid, every_s
        self.anon = self.file = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def now(self) -> tuple[int, int]:
        fields: dict[str, int] = {}
        try:
            for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                key, _, value = line.partition(":")
                if key in ("RssAnon", "RssFile"):
                    fields[key] = int(value.split()[0]) * 1024
        except OSError:
            pass
        return fields.get("RssAnon", 0), fields.get("RssFile", 0)

    def _poll(self) -> None:
        while not self._stop.wait(self.every_s):
            anon, file = self.now()
            self.anon, self.file = max(self.anon, anon), max(self.file, file)

    def major_faults(self) -> int:
        """Pages the process has read from disk on a fault (its mapped weights paged in)."""
        return self._stat_field(9)  # majflt, after the command's name

    def minor_faults(self) -> int:
        """Pages the process touched fresh without reading them (new heap or mapped memory)."""
        return self._stat_field(7)  # minflt

    def _stat_field(self, index: int) -> int:
        try:
            stat = Path(f"/proc/{self.pid}/stat").read_text()
        except OSError:
            return 0
        return int(stat.rpartition(")")[2].split()[index])

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


class MemoryCage:
    """A memory cgroup (v2 `memory.max` or v1 `memory.limit_in_bytes`) capping a process and its
    page cache at `limit` bytes: a small machine, simulated. Needs a writable cgroup tree (root);
    `prefix` is None when there is none, and the run is budgeted but not confined."""

    def __init__(self, limit: int) -> None:
        self.path: Path | None = None
        v2, v1 = Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/memory")
        name = f"inline-real-size-{os.getpid()}"
        for root, knob in ((v2, "memory.max"), (v1, "memory.limit_in_bytes")):
            if not (root / knob).exists() and not (root / "cgroup.controllers").exists():
                continue
            try:
                (root / name).mkdir()
                (root / name / knob).write_text(str(limit))
            except OSError:
                continue
            self.path = root / name
            break

    @property
    def prefix(self) -> list[str] | None:
        if self.path is None:
            return None
        procs = self.path / "cgroup.procs"
        return ["sh", "-c", f'echo $$ > {procs} && exec "$0" "$@"']

    def close(self) -> None:
        if self.path is not None:
            for _ in range(50):  # the server's exit takes a moment to leave the group
                try:
                    self.path.rmdir()
                    return
                except OSError:
                    time.sleep(0.1)


def drop_cached(models: Path) -> None:
    """Evict the model files from the page cache, so a confined server reads them itself."""
    drop_from_page_cache(models)


@contextmanager
def server(
    models: Path, env: dict[str, str], prefix: list[str] | None = None
) -> Generator[tuple[str, Any]]:
    """A real server of this checkout on `models` (the CPU profile, `env` on top; `prefix`: a
    command it runs under, e.g. `MemoryCage.prefix`): (its host:port, its process). Its log's
    memory-budget warnings are printed when it stops."""
    data = Path(tempfile.mkdtemp(prefix="real-size-data-"))
    log = data / "server.log"
    started = start_server(models, data, log, env=env, src=ROOT / "src", prefix=prefix)
    try:
        yield started.base.removeprefix("http://"), started.proc
    finally:
        started.stop()
        for line in log.read_text(errors="replace").splitlines():
            if "budget" in line:
                print(f"server: {line}")
        shutil.rmtree(data, ignore_errors=True)


def run_graph(base: str, graph: dict[str, Any], target: str, wait_s: float = 900) -> float:
    """Seconds from the POST of `graph` to its `run_done` (a run's error or cancel stops here)."""
    start = time.perf_counter()
    response = HTTP.post(
        f"http://{base}/v1/runs", json={"graph": graph, "target": target}, timeout=60
    )
    response.raise_for_status()
    run_id = response.json()["runId"]
    with connect(f"ws://{base}/v1/runs/{run_id}/events") as ws:
        while True:
            message = json.loads(ws.recv(timeout=wait_s))
            if message["type"] in ("run_done", "error", "cancelled"):
                break
    if message["type"] != "run_done":
        raise SystemExit(f"run {run_id} ended with {message}")
    return time.perf_counter() - start


def health(base: str) -> dict[str, Any]:
    return cast(dict[str, Any], HTTP.get(f"http://{base}/v1/health", timeout=30).json())


def residency(base: str) -> dict[str, Any]:
    return cast(dict[str, Any], health(base)["models"]["residency"])


# -- the measure -----------------------------------------------------------------------------------


def measure_renders(
    models: Path,
    renders: int,
    env: dict[str, str],
    graph: Callable[[int], dict[str, Any]],
    target: str,
) -> dict[str, Any]:
    """A real server's memory over `renders` renders of `graph(seed)` (any family's)."""
    times: list[float] = []
    with server(models, env) as (base, proc):
        peaks = RssPeaks(proc.pid)
        after_first: dict[str, Any] = {}
        faults_after_first = 0
        for seed in range(renders):
            times.append(run_graph(base, graph(seed), target, wait_s=3600))
            if seed == 0:
                after_first = residency(base)
                faults_after_first = peaks.major_faults()
        counters = residency(base)
        device = health(base)["device"]
        steady_faults = peaks.major_faults() - faults_after_first
        peaks.close()
    return {
        "env": env,
        "dtype": device.get("dtype"),
        "memoryBudgetMb": device.get("memoryBudgetMb"),
        "renderS": [round(t, 1) for t in times],
        "peakAnonGiB": round(peaks.anon / GIB, 2),
        "peakFileGiB": round(peaks.file / GIB, 2),
        "residencyAfterFirst": after_first,
        "residency": counters,
        "steadyReloads": counters["reloads"] - after_first.get("reloads", 0),
        "steadyMajorFaults": steady_faults,
    }


def memory_rows(result: dict[str, Any]) -> list[Row]:
    """`measure_renders`' figures as the table's rows."""
    counters = result["residency"]
    return [
        ("compute dtype", result["dtype"]),
        ("memory budget MB", result["memoryBudgetMb"]),
        ("render s (first loads)", " / ".join(str(t) for t in result["renderS"])),
        ("peak anonymous RSS GiB", result["peakAnonGiB"]),
        ("peak file-backed RSS GiB", result["peakFileGiB"]),
        ("mapped GiB", round(int(counters.get("mappedBytes", 0)) / GIB, 2)),
        ("resident (copied) GiB", round(int(counters.get("residentBytes", 0)) / GIB, 2)),
        ("kept weights", counters.get("keptWeights")),
        ("loads / reloads", f"{counters.get('loads')} / {counters.get('reloads')}"),
        ("reloads after the first render", result["steadyReloads"]),
        ("pages read from disk after the first render", result["steadyMajorFaults"]),
    ]


# -- the report ------------------------------------------------------------------------------------


def bench_parser(
    description: str, *, renders: int, size: int, steps: int
) -> argparse.ArgumentParser:
    """The options every memory bench takes, with its own defaults."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--renders", type=int, default=renders)
    parser.add_argument("--size", type=int, default=size)
    parser.add_argument("--steps", type=int, default=steps)
    parser.add_argument("--models", type=Path, default=None, help="build into / reuse this folder")
    parser.add_argument("--keep", action="store_true", help="keep the built set")
    parser.add_argument("--dtype", default="auto", help="INLINE_DTYPE for the server")
    return parser


def print_rows(rows: list[Row] | list[tuple[str, object, str]]) -> None:
    """The table: a measure and its value (and a target, where rows carry one)."""
    if rows and len(rows[0]) == 3:
        print(f"{'measure':46} {'value':>10}  target")
        for name, value, target in cast(list[tuple[str, object, str]], rows):
            print(f"{name:46} {value!s:>10}  {target}")
        return
    print(f"{'measure':46} value")
    for name, value in cast(list[Row], rows):
        print(f"{name:46} {value}")


def write_results(stem: str, out: Mapping[str, Any]) -> None:
    path = RESULTS / f"{stem}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {path}")


def machine(start_load: tuple[float, float, float]) -> dict[str, Any]:
    return {
        "cpus": os.cpu_count(),
        "memTotalGiB": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / GIB, 1),
        "loadAverageStart": start_load,
        "loadAverageEnd": os.getloadavg(),
    }


def run_memory_bench(
    args: argparse.Namespace,
    *,
    stem: str,
    build: Callable[[Path], tuple[str, Any, list[Row]]],
    built_row: str,
    graph: Callable[[int], dict[str, Any]],
    target: str,
    reloaded: str,
) -> int:
    """Build the set (`build(models)`: its JSON key, its value and its table rows; into
    `--models`, or a temporary folder removed after unless `--keep`), render it `--renders`
    times through a real server, print the table, write bench/results/<stem>.json; 1 when a
    render after the first reloaded a model (`reloaded` says which)."""
    given = cast(Path | None, args.models)
    models = given or Path(tempfile.mkdtemp(prefix=f"{stem}-"))
    start_load = os.getloadavg()
    try:
        started = time.perf_counter()
        key, files, rows = build(models)
        build_s = time.perf_counter() - started
        env = {"INLINE_DTYPE": str(args.dtype)}
        result = measure_renders(models, int(args.renders), env, graph, target)
    finally:
        if given is None and not args.keep:
            shutil.rmtree(models, ignore_errors=True)
    print_rows([*rows, (built_row, round(build_s, 1)), *memory_rows(result)])
    settings = {"size": args.size, "steps": args.steps, "renders": args.renders}
    out = {"machine": machine(start_load), "settings": settings, key: files, "server": result}
    write_results(stem, out)
    if result["steadyReloads"]:
        print(f"FAIL: a render after the first reloaded {reloaded}", file=sys.stderr)
        return 1
    return 0
