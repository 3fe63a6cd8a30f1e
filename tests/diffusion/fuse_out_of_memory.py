"""Run by `test_lora_fusing.py` in a process of its own: a fuse that fails for real.

The process's address space is capped (`RLIMIT_AS`) a little above what it uses, just before the
forward whose held stack the policy fuses: making the copy of a 16 MiB layer cannot allocate, as
a device out of memory cannot, and that forward must run per row and match the per-row forward.
The cap is lifted after it. Prints one JSON line: what it saw."""

from __future__ import annotations

import json
import resource
import sys

import torch
from torch import nn

from inline_core.device.adapters import FUSE_AFTER_FORWARDS, adapter_mode
from inline_core.diffusion.adapter_counts import AdapterTotals
from inline_core.diffusion.adapters.bank import AdapterBank
from inline_core.diffusion.adapters.stack import LoraStack, LoraUse
from inline_core.diffusion.adapters.weights import LoraWeights, LowRank
from inline_core.diffusion.libs import manual_seed
from inline_core.diffusion.residency import ResidentCache
from inline_core.engine.stacks import ResidentCopies

WIDTH, RANK = 2048, 4  # one float32 weight: 16 MiB
HEADROOM = 4 * 2**20  # the cap, above what the process has mapped when it is set


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.big = nn.Linear(WIDTH, WIDTH)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.big(x)


def read(name: str, path: str, device: torch.device, dtype: torch.dtype) -> LoraWeights:
    g = torch.Generator().manual_seed(1)
    pair = LowRank(torch.randn(WIDTH, RANK, generator=g), torch.randn(RANK, WIDTH, generator=g))
    return LoraWeights(name, {"big": pair})


def mapped_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize in /proc/self/status")


def main() -> None:
    manual_seed(0)
    model = Model().eval()
    totals = AdapterTotals()
    residency = ResidentCache(None)
    mode = adapter_mode(offload=False, quantize=None)
    cpu = torch.device("cpu")
    copies = ResidentCopies(residency, totals)
    bank = AdapterBank(model, read, cpu, torch.float32, None, "m", copies, mode)
    rows = AdapterBank(model, read, cpu, torch.float32, None, "m")  # per row, for reference
    x = torch.randn(2, 3, WIDTH)
    held: list[LoraStack] = [(LoraUse("l", "/loras/l", "id-l", 1.0),)] * 2

    def forward() -> torch.Tensor:
        with torch.inference_mode(), bank.forward(held):
            return model(x)

    with torch.inference_mode(), rows.applied(held):
        reference = model(x)
    for _ in range(FUSE_AFTER_FORWARDS - 1):
        forward()
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = mapped_bytes() + HEADROOM
    resource.setrlimit(resource.RLIMIT_AS, (cap if hard < 0 else min(cap, hard), hard))
    try:
        capped = forward()  # the policy fuses here, and the copy cannot be allocated
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    after_cap = totals.to_json()
    again = forward()  # the same stack still held: not tried again
    after_again = totals.to_json()
    with torch.inference_mode(), bank.forward([(), ()]):
        model(x)  # another stack (none) held a forward
    fused = [forward() for _ in range(FUSE_AFTER_FORWARDS)][-1]  # the last on the new copy
    print(
        json.dumps(
            {
                "capped": after_cap,
                "again": after_again,
                "end": totals.to_json(),
                "cappedMatches": bool(torch.allclose(capped, reference, atol=1e-4)),
                "againMatches": bool(torch.allclose(again, reference, atol=1e-4)),
                "fusedMatches": bool(torch.allclose(fused, reference, atol=1e-3)),
                "resident": residency.stats().resident,
            }
        )
    )


if __name__ == "__main__":
    main()
    sys.exit(0)
