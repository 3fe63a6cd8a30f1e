"""FLUX.2's hook into diffusers' FLUX.2 processors under Ring (`flux2/ring.py`): the double- and
single-stream blocks' processors both carry the ring, and diffusers' `dispatch_attention_fn` is
wrapped for the whole process, so a call that is not the ring's (any in-process render, a Ulysses
split's) must reach diffusers' own function unchanged; a ring call, unmasked as FLUX.2's
processors make it, attends as SDPA does, and an option the ring does not honour is refused, not
dropped (`tests/families/ring_dispatch_harness.py`). No worker group starts here (the ring
renders: `test_flux2_ring_split.py`, `test_flux2_usp_split.py`)."""

from __future__ import annotations

from inline_core.families.flux2.ring import ROUTE
from tests.families.ring_dispatch_harness import (
    DispatchCase,
    assert_other_calls_reach_the_wrapped_function,
    assert_ring_calls_attend_as_sdpa_and_refuse_what_they_cannot_honour,
)

CASE = DispatchCase(ROUTE, masked=False, refused=("dropout_p", 0.5), options={"backend": None})


def test_both_block_kinds_route_and_other_calls_reach_diffusers_own_function() -> None:
    assert ROUTE.blocks == ("transformer_blocks", "single_transformer_blocks")
    assert_other_calls_reach_the_wrapped_function(CASE)


def test_a_ring_call_attends_as_sdpa_and_refuses_what_it_cannot_honour() -> None:
    assert_ring_calls_attend_as_sdpa_and_refuse_what_they_cannot_honour(CASE)
