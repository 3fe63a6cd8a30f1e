"""The ring's hook into diffusers' Qwen-Image processor (`ring_attention.ROUTE`): it wraps the
module's `dispatch_attention_fn` for the whole process, so a call that is not the ring's (any
in-process render, split or not) must reach diffusers' own function unchanged; a ring call
attends as masked SDPA does, and an option the ring does not honour is refused, not dropped
(`tests/families/ring_dispatch_harness.py`)."""

from __future__ import annotations

from inline_core.families.qwen_image.ring_attention import ROUTE
from tests.families.ring_dispatch_harness import (
    DispatchCase,
    assert_other_calls_reach_the_wrapped_function,
    assert_ring_calls_attend_as_sdpa_and_refuse_what_they_cannot_honour,
)

CASE = DispatchCase(ROUTE, masked=True, refused=("is_causal", True))


def test_a_call_that_is_not_the_rings_reaches_diffusers_own_function() -> None:
    assert_other_calls_reach_the_wrapped_function(CASE)


def test_a_ring_call_attends_as_masked_sdpa_and_refuses_what_it_cannot_honour() -> None:
    assert_ring_calls_attend_as_sdpa_and_refuse_what_they_cannot_honour(CASE)
