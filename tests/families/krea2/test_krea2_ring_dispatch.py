"""Krea 2's hook into cache-dit's Krea 2 processor under Ring (`krea2/ring.py`): it wraps the
planner module's `_dispatch_attention_fn` for the whole process, so a call that is not the ring's
(a Ulysses split's, the text fusion's) must reach cache-dit's own function unchanged; a ring call
attends as masked SDPA does (the processor's mask: the prompt's padding, then the image's tokens,
its key/value heads already repeated), and an option the ring does not honour is refused, not
dropped (`tests/families/ring_dispatch_harness.py`). No worker group starts here (the ring
renders: `test_krea2_ring_split.py`)."""

from __future__ import annotations

from inline_core.families.krea2.ring import ROUTE
from tests.families.ring_dispatch_harness import (
    DispatchCase,
    assert_other_calls_reach_the_wrapped_function,
    assert_ring_calls_attend_as_sdpa_and_refuse_what_they_cannot_honour,
)

CASE = DispatchCase(ROUTE, masked=True, refused=("enable_gqa", True), options={"enable_gqa": False})


def test_a_call_that_is_not_the_rings_reaches_cache_dits_own_function() -> None:
    assert_other_calls_reach_the_wrapped_function(CASE)


def test_a_ring_call_attends_as_masked_sdpa_and_refuses_what_it_cannot_honour() -> None:
    assert_ring_calls_attend_as_sdpa_and_refuse_what_they_cannot_honour(CASE)
