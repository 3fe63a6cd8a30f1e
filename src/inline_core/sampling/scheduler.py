"""The grouping policy: which active jobs share the next forward.

At each step boundary the loop runs one group. The leader is the job served least recently (ties:
the oldest), so groups take turns and nothing starves: a newly admitted job counts as served at its
admission, so it waits at most one round, and a stream of arrivals cannot push others back. The
leader's compatible peers (same pipeline, equal `batch_key`) join in the same order while
`max_batch` and the token budget allow; a leader over the budget on its own still runs, alone.

The budget bounds the padded size of the forward, `len(group) * max(tokens)`: a DiT that takes a
batch of sequences (like most) pads each request's sequence to the longest in the batch, so a small
image riding with a large one costs as much as another large one. Equal sizes make this the plain
sum of image tokens; mixed sizes cannot hide padding from it.
"""

from __future__ import annotations

from collections.abc import Sequence

from inline_core.sampling.limits import BatchLimits
from inline_core.sampling.ticket import Ticket


def service_order(active: Sequence[Ticket]) -> list[Ticket]:
    return sorted(active, key=lambda t: (t.last_served, t.seq))


def next_group(active: Sequence[Ticket], limits: BatchLimits) -> list[Ticket]:
    """The tickets of the next forward, leader first. `active` must not be empty."""
    order = service_order(active)
    leader = order[0]
    group = [leader]
    if not limits.batching:
        return group
    longest = leader.tokens
    for ticket in order[1:]:
        if len(group) >= limits.max_batch:
            break
        if ticket.key != leader.key:
            continue
        if padded_tokens(len(group) + 1, max(longest, ticket.tokens)) > limits.token_budget:
            continue
        group.append(ticket)
        longest = max(longest, ticket.tokens)
    return group


def padded_tokens(size: int, longest: int) -> int:
    """Tokens a forward of `size` requests processes when each is padded to the longest."""
    return size * longest
