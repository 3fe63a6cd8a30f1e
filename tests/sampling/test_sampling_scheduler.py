"""The grouping policy and the limits, on tickets directly (no threads)."""

from __future__ import annotations

import pytest
from sampling_toy import ToyPipeline, make_job, make_state

from inline_core.errors import InvalidRequest
from inline_core.sampling.limits import CPU_LIMITS, CUDA_LIMITS, BatchLimits, resolve_limits
from inline_core.sampling.scheduler import next_group
from inline_core.sampling.ticket import Ticket

PIPE = ToyPipeline()


def ticket(
    name: str,
    seq: int,
    *,
    size: int = 2,
    cfg: bool = False,
    served: int = 0,
    pipe: ToyPipeline = PIPE,
) -> Ticket:
    t = Ticket(
        job=make_job(pipe, make_state(name, seed=seq, size=size, cfg=cfg)), state=None, seq=seq
    )
    t.state = t.job.state
    t.read_shape()
    t.last_served = served
    return t


def names(group: list[Ticket]) -> list[str]:
    return [t.job.label for t in group]


def test_least_recently_served_leads_and_compatible_peers_join_oldest_first() -> None:
    active = [
        ticket("a", 0, served=5),
        ticket("b", 1, served=3),
        ticket("c", 2, served=4),
        ticket("d", 3, served=3),
    ]
    assert names(next_group(active, BatchLimits(max_batch=3, token_budget=100))) == ["b", "d", "c"]


def test_groups_take_turns_across_incompatible_keys() -> None:
    plain = [ticket("p1", 0, served=2), ticket("p2", 1, served=2)]
    cfg = [ticket("c1", 2, cfg=True, served=1)]
    other_pipe = [ticket("o1", 3, served=1, pipe=ToyPipeline("other"))]
    limits = BatchLimits(max_batch=8, token_budget=100)
    assert names(next_group([*plain, *cfg, *other_pipe], limits)) == ["c1"]
    cfg[0].last_served = 3
    assert names(next_group([*plain, *cfg, *other_pipe], limits)) == ["o1"]
    other_pipe[0].last_served = 4
    assert names(next_group([*plain, *cfg, *other_pipe], limits)) == ["p1", "p2"]


def test_a_newcomer_waits_for_the_round_not_in_front_of_it() -> None:
    # Admitted at iteration 7: jobs last served before that go first.
    waiting = ticket("old", 0, cfg=True, served=6)
    newcomer = ticket("new", 1, served=7)
    assert names(next_group([newcomer, waiting], BatchLimits(8, 100))) == ["old"]


def test_token_budget_first_fit_and_a_large_leader_alone() -> None:
    limits = BatchLimits(max_batch=8, token_budget=20)
    big = ticket("big", 0, size=5)  # 25 tokens
    small = [ticket(f"s{i}", i + 1, size=3) for i in range(3)]  # 9 tokens each
    assert names(next_group([big, *small], limits)) == ["big"]
    big.last_served = 1
    assert names(next_group([big, *small], limits)) == ["s0", "s1"]
    medium = ticket("m", 9, size=4)  # 16 tokens: skipped, a later small one still fits
    tiny = ticket("t", 10, size=1)
    assert names(next_group([small[0], medium, tiny], limits)) == ["s0", "t"]


def test_max_batch_one_is_always_alone() -> None:
    active = [ticket(f"j{i}", i) for i in range(4)]
    assert names(next_group(active, BatchLimits(max_batch=1, token_budget=10_000))) == ["j0"]


def test_limits_resolve_explicit_values_over_device_defaults() -> None:
    assert resolve_limits() == CPU_LIMITS
    assert resolve_limits(device="cuda:0 NVIDIA H200") == CUDA_LIMITS
    cuda_off = BatchLimits(1, CUDA_LIMITS.token_budget, CUDA_LIMITS.decode_pixel_budget)
    assert resolve_limits(max_batch=1, device="cuda") == cuda_off
    assert resolve_limits(token_budget=64) == BatchLimits(
        CPU_LIMITS.max_batch, 64, CPU_LIMITS.decode_pixel_budget
    )
    assert resolve_limits(decode_pixel_budget=0).decode_pixel_budget == 0
    assert not resolve_limits(max_batch=1).batching
    # Batching off turns batched decodes off too; a zero budget turns off only them.
    assert not resolve_limits(max_batch=1).batched_decodes
    assert not resolve_limits(decode_pixel_budget=0).batched_decodes
    assert resolve_limits().batched_decodes
    with pytest.raises(InvalidRequest):
        resolve_limits(max_batch=0)
    with pytest.raises(InvalidRequest):
        resolve_limits(token_budget=-1)
    with pytest.raises(InvalidRequest):
        resolve_limits(decode_pixel_budget=-1)


def test_the_budget_counts_padding_to_the_longest_request() -> None:
    small, larger = ticket("small", 0, size=2), ticket("larger", 1, size=3)  # 4 and 9 tokens
    # 4 + 9 = 13 would fit a budget of 16, but padded to the longest it is 2 * 9 = 18.
    assert names(next_group([small, larger], BatchLimits(max_batch=8, token_budget=16))) == [
        "small"
    ]
    assert names(next_group([small, larger], BatchLimits(max_batch=8, token_budget=18))) == [
        "small",
        "larger",
    ]
