"""Fused LoRA copies on a small model, through the bank and a real residency: a stack that holds
every row gets a private copy once the policy says it pays, forwards on it equal the per-row
forwards, mixed forwards run per row on the untouched base weights, and the copy is counted in
the budget, replaced by another held stack, dropped when its stack goes away and let go when the
residency evicts it."""

from __future__ import annotations

import gc
import hashlib
import json
import subprocess
import sys
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from inline_core.device.adapters import (
    DROP_AFTER_FORWARDS,
    FUSE_AFTER_FORWARDS,
    FuseDecision,
    adapter_mode,
)
from inline_core.diffusion.adapter_counts import AdapterTotals
from inline_core.diffusion.adapters.bank import AdapterBank
from inline_core.diffusion.adapters.fused import FusedCopy
from inline_core.diffusion.adapters.fusing import StackKey, stack_key
from inline_core.diffusion.adapters.stack import LoraStack, LoraUse
from inline_core.diffusion.adapters.weights import LoraWeights, LowRank
from inline_core.diffusion.libs import manual_seed
from inline_core.diffusion.residency import Footprint, ResidentCache
from inline_core.engine.stacks import ResidentCopies

WIDTH, RANK = 16, 4


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Linear(WIDTH, WIDTH)
        self.second = nn.Linear(WIDTH, WIDTH)
        self.plain = nn.Linear(WIDTH, WIDTH)  # no LoRA adapts it

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.plain(torch.relu(self.second(torch.relu(self.first(x)))))


def lora(name: str, seed: int, modules: tuple[str, ...]) -> LoraWeights:
    g = torch.Generator().manual_seed(seed)
    layers = {
        m: LowRank(torch.randn(WIDTH, RANK, generator=g), torch.randn(RANK, WIDTH, generator=g))
        for m in modules
    }
    return LoraWeights(name, layers)


FILES = {
    "x": lora("x", 1, ("first", "second")),
    "y": lora("y", 2, ("second",)),
}


def read(name: str, path: str, device: torch.device, dtype: torch.dtype) -> LoraWeights:
    return FILES[name]


def use(name: str, strength: float = 1.0) -> LoraUse:
    return LoraUse(name, f"/loras/{name}", f"id-{name}", strength)


def checksum(model: nn.Module) -> str:
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode() + tensor.numpy().tobytes())
    return digest.hexdigest()


class Rig:
    def __init__(
        self, budget_bytes: int | None = None, totals: AdapterTotals | None = None
    ) -> None:
        manual_seed(0)
        self.model = Model().eval()
        self.residency = ResidentCache(budget_bytes)
        self.totals = totals or AdapterTotals()
        copies = ResidentCopies(self.residency, self.totals)
        mode = adapter_mode(offload=False, quantize=None)
        cpu = torch.device("cpu")
        self.bank = AdapterBank(self.model, read, cpu, torch.float32, None, "m", copies, mode)
        # The same model's per-row forwards, for reference: a bank that never fuses.
        self.rows = AdapterBank(self.model, read, cpu, torch.float32, None, "m")
        self.x = torch.randn(3, 5, WIDTH, generator=torch.Generator().manual_seed(9))

    def forward(self, stacks: list[LoraStack]) -> torch.Tensor:
        with torch.inference_mode(), self.bank.forward(stacks):
            return self.model(self.x)

    def per_row(self, stacks: list[LoraStack]) -> torch.Tensor:
        with torch.inference_mode(), self.rows.applied(stacks):
            return self.model(self.x)

    def counts(self) -> dict[str, object]:
        return self.totals.to_json()


def test_a_held_stack_runs_on_a_fused_copy_equal_to_per_row_on_untouched_weights() -> None:
    rig = Rig()
    base = checksum(rig.model)
    held: list[LoraStack] = [(use("x"), use("y", 0.5))] * 3
    for forward in range(1, FUSE_AFTER_FORWARDS + 3):
        out = rig.forward(held)
        fused = forward >= FUSE_AFTER_FORWARDS
        assert torch.allclose(out, rig.per_row(held), atol=1e-5), forward
        assert rig.counts()["fuses"] == int(fused)
        assert checksum(rig.model) == base  # the base weights are never written
    counts = rig.counts()
    assert counts["fusedForwards"] == 3 and counts["perRowForwards"] == FUSE_AFTER_FORWARDS - 1
    # The copy is a residency entry, counted in its budget: the two adapted layers' weights.
    stats = rig.residency.stats()
    assert stats.resident == 1 and stats.resident_bytes == 2 * WIDTH * WIDTH * 4
    assert stats.loads == 0  # made, not loaded from files

    # Mixed rows run per row on the shared weights; the copy stays for its stack's return.
    mixed: list[LoraStack] = [(use("x"),), (use("y"),), ()]
    assert torch.allclose(rig.forward(mixed), rig.per_row(mixed), atol=1e-6)
    assert rig.counts()["perRowForwards"] == FUSE_AFTER_FORWARDS
    assert torch.allclose(rig.forward(held), rig.per_row(held), atol=1e-5)
    assert rig.counts()["fusedForwards"] == 4 and rig.counts()["fuses"] == 1
    assert checksum(rig.model) == base


def test_another_held_stack_replaces_the_copy_and_a_stack_gone_away_drops_it() -> None:
    rig = Rig()
    x_only: list[LoraStack] = [(use("x"),)] * 3
    y_only: list[LoraStack] = [(use("y", -0.7),)] * 3
    for _ in range(FUSE_AFTER_FORWARDS):
        rig.forward(x_only)
    outs = [rig.forward(y_only) for _ in range(FUSE_AFTER_FORWARDS)]
    assert torch.allclose(outs[-1], rig.per_row(y_only), atol=1e-5)
    counts = rig.counts()
    assert counts["fuses"] == 2 and counts["drops"] == 1
    assert rig.residency.stats().resident == 1  # one copy a model
    # Plain forwards: the copy's stack is away, and after a few forwards its copy goes.
    for _ in range(DROP_AFTER_FORWARDS):
        rig.forward([(), (), ()])
    assert rig.counts()["drops"] == 2 and rig.residency.stats().resident == 0
    assert rig.counts()["perRowForwards"] == 2 * (FUSE_AFTER_FORWARDS - 1)  # plain ones uncounted


def test_the_budgets_room_decides_and_an_evicted_copy_is_let_go() -> None:
    copy_bytes = 2 * WIDTH * WIDTH * 4
    tight = Rig(budget_bytes=copy_bytes - 1)
    held: list[LoraStack] = [(use("x"),)] * 3
    for _ in range(FUSE_AFTER_FORWARDS + 2):
        tight.forward(held)
    counts = tight.counts()
    assert counts["fuses"] == 0 and counts["fusedForwards"] == 0
    decision = counts["lastDecision"]
    assert isinstance(decision, dict) and "left" in str(decision["reason"])  # pyright: ignore[reportUnknownArgumentType]

    roomy = Rig(budget_bytes=copy_bytes)
    for _ in range(FUSE_AFTER_FORWARDS):
        roomy.forward(held)
    assert roomy.counts()["fuses"] == 1
    # Memory needed elsewhere: the residency evicts the copy; the next forward runs per row.
    roomy.residency.put("a model part", object(), Footprint(copy_bytes))
    assert torch.allclose(roomy.forward(held), roomy.per_row(held), atol=1e-6)
    assert roomy.counts()["fusedForwards"] == 1
    assert roomy.residency.stats().evictions == 1


def fused_key(stack: LoraStack) -> tuple[str, str, StackKey]:
    return ("lora-fused", "m", stack_key(stack))  # the copy's name for the Rig's model "m"


def test_a_copy_the_residency_evicts_is_freed_at_once() -> None:
    copy_bytes = 2 * WIDTH * WIDTH * 4
    rig = Rig(budget_bytes=copy_bytes)
    held: list[LoraStack] = [(use("x"),)] * 3
    for _ in range(FUSE_AFTER_FORWARDS):
        rig.forward(held)
    copy = rig.residency.peek(fused_key(held[0]))
    assert isinstance(copy, FusedCopy) and rig.counts()["fuses"] == 1
    freed = [weakref.ref(copy), *(weakref.ref(w) for w in copy.weights.values())]
    del copy
    # Memory needed elsewhere: the residency evicts the copy, and nothing else holds it (no
    # forward has run since to notice it gone).
    rig.residency.put("a model part", object(), Footprint(copy_bytes))
    gc.collect()
    assert [ref() for ref in freed] == [None] * len(freed)


def test_a_dropped_model_is_freed_with_its_hooks_and_fusing() -> None:
    rig = Rig()
    held: list[LoraStack] = [(use("x"), use("y", 0.5))] * 3
    for _ in range(FUSE_AFTER_FORWARDS + 1):
        rig.forward(held)
    rig.per_row([(use("y"),), (), ()])  # the per-row hooks installed on it too
    assert rig.counts()["fusedForwards"] == 2
    model = weakref.ref(rig.model)
    del rig.model, rig.bank, rig.rows
    gc.collect()
    assert model() is None
    # Its copy is a residency entry like any, counted in the budget until evicted or replaced.
    assert rig.residency.stats().resident == 1


def test_a_fuse_that_fails_runs_its_forward_per_row() -> None:
    """In a process whose address space is capped just before the forward the policy fuses on:
    the copy cannot be allocated (as a device out of memory), and that forward, rather than
    failing its batch, runs per row; the same stack is not tried again while it stays held, and
    is fused once the cap is gone and another stack has held a forward."""
    helper = Path(__file__).with_name("fuse_out_of_memory.py")
    done = subprocess.run(
        [sys.executable, str(helper)], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-4000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    capped = seen["capped"]
    assert capped["fuses"] == 0 and capped["perRowForwards"] == FUSE_AFTER_FORWARDS
    assert capped["lastDecision"]["fuse"] is False
    assert capped["lastDecision"]["reason"].startswith("fuse failed: ")
    assert "allocate" in capped["lastDecision"]["reason"]
    assert seen["cappedMatches"] and seen["againMatches"] and seen["fusedMatches"]
    again = seen["again"]
    assert again["fuses"] == 0 and again["perRowForwards"] == FUSE_AFTER_FORWARDS + 1
    assert seen["end"]["fuses"] == 1 and seen["end"]["fusedForwards"] == 1
    assert seen["resident"] == 1
    assert done.stderr.count("could not be made") == 1  # logged once


def test_put_if_room_puts_into_the_room_there_is_and_evicts_nothing() -> None:
    cache = ResidentCache(budget_bytes=100)
    cache.put("part", "weights", Footprint(60))
    assert not cache.put_if_room("copy", "big", Footprint(41))
    assert cache.peek("part") == "weights" and cache.peek("copy") is None
    assert cache.put_if_room("copy", "fits", Footprint(40))
    assert cache.put_if_room("copy", "replaces", Footprint(40))  # its own bytes count as freed
    assert cache.peek("copy") == "replaces" and cache.stats().evictions == 0
    assert ResidentCache(None).put_if_room("copy", "any", Footprint(10**12))  # no budget


@dataclass
class RoomTakenWhileFusing(AdapterTotals):
    """The counts, and at the moment a copy has been decided on (its room checked, the copy not
    made yet) another render loads a part that takes that room: the interleaving of a load on
    another thread with a fuse that takes seconds on a real model, made certain."""

    meanwhile: Callable[[], object] | None = None

    def decided(self, decision: FuseDecision) -> None:
        super().decided(decision)
        if decision.fuse and self.meanwhile is not None:
            self.meanwhile()


def test_a_copy_never_evicts_a_part_that_took_its_room_meanwhile() -> None:
    copy_bytes = 2 * WIDTH * WIDTH * 4
    totals = RoomTakenWhileFusing()
    rig = Rig(budget_bytes=copy_bytes, totals=totals)
    part = ("other render", "transformer")

    def load() -> tuple[object, Footprint]:
        return "its weights", Footprint(copy_bytes // 2)

    totals.meanwhile = lambda: rig.residency.get(part, load)
    held: list[LoraStack] = [(use("x"),)] * 3
    outs = [rig.forward(held) for _ in range(FUSE_AFTER_FORWARDS + 1)]
    assert rig.residency.peek(part) == "its weights"  # never evicted for the copy
    assert rig.residency.stats().evictions == 0 and rig.residency.stats().resident == 1
    counts = rig.counts()
    assert counts["fuses"] == 0 and counts["fusedForwards"] == 0
    decision = counts["lastDecision"]
    assert isinstance(decision, dict) and decision["fuse"] is False  # the next forward's
    assert all(torch.allclose(out, rig.per_row(held), atol=1e-6) for out in outs)
