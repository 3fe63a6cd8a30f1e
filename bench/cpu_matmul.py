"""The real-size Z-Image transformer's matmuls on this CPU, each way of computing them side by side.

    .venv/bin/python bench/cpu_matmul.py [--rounds 8] [--tokens 32,64,256,288] [--no-inductor]

A seed-only real-size render's matmuls (`aten::mm`) are most of its time (`device/compile.py`),
so this times the transformer's Linear shapes alone: K, N from its dim 3840 and MLP 10240 (one
layer: q, k, v, out 3840->3840; w1, w3 3840->10240; w2 10240->3840), M the token counts of a
render with batch one: 32 (a 64 px render's refiners: 16 image tokens and the prompt's, each
padded to 32), 64 (its main layer), 256 and 288 (a 256 px render's). Ways, alternated in one
process (A B C A B C ...), random bf16 weights:
- `eager`: `F.linear` in bf16, as the server computes today (oneDNN underneath, the weight in
  its plain layout);
- `packed`: `torch.ops.mkldnn._linear_pointwise` on a weight oneDNN reordered once
  (`_reorder_linear_weight`, its batch hint M), what inductor's freezing emits on the CPU;
- `packed-nohint`: the same weight reordered without a batch hint (one copy for every M);
- `fp32-kept`: float32 compute on a float32 copy of the weights (twice the memory);
- `eager-1t`, `packed-1t`: one compute thread (`torch.set_num_threads(1)`);
- `inductor-freeze` (not with `--no-inductor`): the MLP (w1, w3, SiLU gate, w2) compiled with
  `torch._inductor.config.freezing`, against the same MLP eager and packed.
Each row: the median time of the layer's seven matmuls per way, its ratio to eager (per round,
then the median), and the largest difference from eager's output (bf16 levels of 2^-8 relative:
0 means bitwise equal). Prints a table with the load (`os.getloadavg`); writes
bench/results/cpu_matmul.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

RESULTS = Path(__file__).resolve().parent / "results" / "cpu_matmul.json"
DIM, MLP = 3840, 10240
LAYER = {"q": (DIM, DIM), "k": (DIM, DIM), "v": (DIM, DIM), "out": (DIM, DIM)} | {
    "w1": (DIM, MLP),
    "w3": (DIM, MLP),
    "w2": (MLP, DIM),
}


def weights() -> dict[str, torch.Tensor]:
    """One layer's weights, (N, K) as `nn.Linear` keeps them."""
    torch.manual_seed(0)  # pyright: ignore[reportUnknownMemberType]
    return {
        name: (torch.randn(n, k) * k**-0.5).to(torch.bfloat16) for name, (k, n) in LAYER.items()
    }


def packed(ws: dict[str, torch.Tensor], hint: int | None) -> dict[str, torch.Tensor]:
    reorder: Any = torch.ops.mkldnn._reorder_linear_weight  # pyright: ignore[reportUnknownMemberType]
    return {name: reorder(w, hint) for name, w in ws.items()}


def linear_packed(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    pointwise: Any = torch.ops.mkldnn._linear_pointwise  # pyright: ignore[reportUnknownMemberType]
    return pointwise(x, w, None, "none", [], "")


def inputs(tokens: int) -> dict[int, torch.Tensor]:
    torch.manual_seed(tokens)  # pyright: ignore[reportUnknownMemberType]
    return {k: torch.randn(tokens, k, dtype=torch.bfloat16) for k in (DIM, MLP)}


def layer_ways(tokens: int, ws: dict[str, torch.Tensor]) -> dict[str, Callable[[], torch.Tensor]]:
    """Each way as a call computing the layer's seven matmuls; each returns w2's output."""
    xs = inputs(tokens)
    hinted, unhinted = packed(ws, tokens), packed(ws, None)
    f32 = {name: w.float() for name, w in ws.items()}

    def run(mm: Callable[[torch.Tensor, str], torch.Tensor]) -> torch.Tensor:
        out = xs[DIM]
        for name, (k, _n) in LAYER.items():
            out = mm(xs[k], name)
        return out

    def threads(n: int, fn: Callable[[], torch.Tensor]) -> Callable[[], torch.Tensor]:
        def call() -> torch.Tensor:
            before = torch.get_num_threads()
            torch.set_num_threads(n)
            try:
                return fn()
            finally:
                torch.set_num_threads(before)

        return call

    eager = lambda: run(lambda x, n: F.linear(x, ws[n]))  # noqa: E731
    pack = lambda: run(lambda x, n: linear_packed(x, hinted[n]))  # noqa: E731
    return {
        "eager": eager,
        "packed": pack,
        "packed-nohint": lambda: run(lambda x, n: linear_packed(x, unhinted[n])),
        "fp32-kept": lambda: run(lambda x, n: F.linear(x.float(), f32[n]).to(torch.bfloat16)),
        "eager-1t": threads(1, eager),
        "packed-1t": threads(1, pack),
    }


class Mlp(torch.nn.Module):
    def __init__(self, ws: dict[str, torch.Tensor]) -> None:
        super().__init__()
        self.w1 = torch.nn.Linear(DIM, MLP, bias=False, dtype=torch.bfloat16)
        self.w3 = torch.nn.Linear(DIM, MLP, bias=False, dtype=torch.bfloat16)
        self.w2 = torch.nn.Linear(MLP, DIM, bias=False, dtype=torch.bfloat16)
        for name in ("w1", "w2", "w3"):
            getattr(self, name).weight.data = ws[name]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


def mlp_ways(tokens: int, ws: dict[str, torch.Tensor]) -> dict[str, Callable[[], torch.Tensor]]:
    import torch._inductor.config as inductor_config

    x = inputs(tokens)[DIM]
    mlp = Mlp(ws).eval()
    hinted = packed(ws, tokens)
    inductor_config.freezing = True
    compiled: Any = torch.compile(mlp, dynamic=False)  # pyright: ignore[reportUnknownMemberType]
    began = time.perf_counter()
    with torch.no_grad():
        compiled(x)
    print(f"  inductor freezing, M={tokens}: compiled in {time.perf_counter() - began:.0f} s")

    def by_hand() -> torch.Tensor:
        gate = F.silu(linear_packed(x, hinted["w1"])) * linear_packed(x, hinted["w3"])
        return linear_packed(gate, hinted["w2"])

    return {
        "mlp-eager": lambda: mlp(x),
        "mlp-packed": by_hand,
        "mlp-inductor-freeze": lambda: compiled(x),
    }


def alternate(
    ways: dict[str, Callable[[], torch.Tensor]], rounds: int
) -> dict[str, dict[str, Any]]:
    """Each way once per round, in turn; medians, per-round ratios to the first way, and the
    largest difference from the first way's output in bf16 levels (2^-8 of the reference)."""
    times: dict[str, list[float]] = {name: [] for name in ways}
    outs: dict[str, torch.Tensor] = {}
    with torch.no_grad():
        for name, call in ways.items():
            outs[name] = call().float()  # warm-up (oneDNN builds its primitives)
        for _ in range(rounds):
            for name, call in ways.items():
                began = time.perf_counter()
                call()
                times[name].append(time.perf_counter() - began)
    first = next(iter(ways))
    base = times[first]
    scale = outs[first].abs().max().item() * 2**-8
    return {
        name: {
            "ms": round(statistics.median(t) * 1e3, 2),
            "speedup": round(statistics.median(b / x for b, x in zip(base, t, strict=True)), 3),
            "maxDiffLevels": round((outs[name] - outs[first]).abs().max().item() / scale, 3),
            "roundsMs": [round(x * 1e3, 2) for x in t],
        }
        for name, t in times.items()
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--tokens", default="32,64,256,288")
    parser.add_argument("--inductor", action=argparse.BooleanOptionalAction, default=True)
    args = parser.parse_args()
    load_start = os.getloadavg()
    ws = weights()
    rows: dict[str, dict[str, Any]] = {}
    for tokens in (int(t) for t in args.tokens.split(",")):
        rows[f"layer M={tokens}"] = alternate(layer_ways(tokens, ws), args.rounds)
        if args.inductor:
            rows[f"mlp M={tokens}"] = alternate(mlp_ways(tokens, ws), args.rounds)
    load_end = os.getloadavg()
    print(f"load average {load_start} -> {load_end}; torch {torch.__version__}, ", end="")
    print(f"{torch.get_num_threads()} threads, {os.cpu_count()} CPUs")
    print(f"{'shape':14} {'way':22} {'median ms':>10} {'vs first':>9} {'diff (levels)':>14}")
    for shape, ways in rows.items():
        for way, row in ways.items():
            print(
                f"{shape:14} {way:22} {row['ms']:>10} {row['speedup']:>8}x"
                f" {row['maxDiffLevels']:>14}"
            )
    out = {
        "command": " ".join(sys.argv),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "cpus": os.cpu_count(),
        "loadAverageStart": load_start,
        "loadAverageEnd": load_end,
        "rows": rows,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
