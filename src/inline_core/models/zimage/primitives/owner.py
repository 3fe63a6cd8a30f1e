"""What the primitive runners share with the Z-Image node (torch-free).

The primitives run on the node's own engine (one resident cache, one device policy) and submit to
the same batched sampler, so they are handed the node's runner, seen through this protocol. Where
the policy splits the model across ranks, `sample` goes to the node's worker group instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, TypeVar

from inline_core.device.split import ParallelSpec
from inline_core.errors import InvalidRequest
from inline_core.graph.runner import NodeCall
from inline_core.models.zimage.resolve import Source, ZImageResolver
from inline_core.sampling.job import BatchedSampler

if TYPE_CHECKING:
    from inline_core.device import DevicePolicy
    from inline_core.models.zimage.engine import ZImageEngine
    from inline_core.models.zimage.remote import ZImageGroup

H = TypeVar("H")


class EngineOwner(Protocol):
    """Implemented by `ZImageRunner`: the engine is built (torch imported) on first use."""

    @property
    def resolver(self) -> ZImageResolver: ...

    @property
    def sampler(self) -> BatchedSampler: ...

    def engine(self) -> ZImageEngine: ...

    def policy(self) -> DevicePolicy: ...

    def split_for_transformer(
        self, transformer: Source, node_id: str | None = None
    ) -> ParallelSpec | None:
        """The split for this transformer; None: render in process."""
        ...

    def group_for(self, split: ParallelSpec) -> ZImageGroup:
        """The worker group running `split` (launched on its first job)."""
        ...


def handle_input(call: NodeCall, port: str, kind: type[H]) -> H:
    """The value on `port`, which must be a handle of `kind` (the validator checked the socket
    kinds, so anything else came from a node of another family)."""
    value = call.inputs.get(port)
    if not isinstance(value, kind):
        got = "nothing" if value is None else type(value).__name__
        raise InvalidRequest(
            f"input {port!r} needs a Z-Image {kind.__name__}, got {got}", node_id=call.node_id
        )
    return value


def optional_handle(call: NodeCall, port: str, kind: type[H]) -> H | None:
    return None if call.inputs.get(port) is None else handle_input(call, port, kind)
