"""A stack's loaded parts say once, for every family's builder, whether its encode and decode run
between steps: only when some part is offloaded to the CPU between uses."""

from __future__ import annotations

from inline_core.contract.builder import Parts
from inline_core.device.policy import Placement


def parts(*offloads: bool) -> Parts:
    placements = {
        f"role{i}": Placement("cpu", "float32", offload=o) for i, o in enumerate(offloads)
    }
    return Parts(values={}, placements=placements, swap=None)


def test_encode_and_decode_run_between_steps_only_under_offload() -> None:
    assert (parts().serial_phases, parts(False, False).serial_phases) == (False, False)
    assert (parts(False, True).serial_phases, parts(True).serial_phases) == (True, True)
