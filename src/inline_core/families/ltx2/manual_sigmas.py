"""The node's `sigmas` and `refine_sigmas`: a pass on explicit sigmas, as ComfyUI's ManualSigmas
writes them ("1., 0.99375, ..., 0.0"), stepped as given, unshifted (torch-free; read at submit)."""

from __future__ import annotations

from inline_core.errors import InvalidRequest


def parse_sigmas(text: str, node_id: str, param: str = "sigmas") -> tuple[float, ...]:
    """The levels before the final 0 (the schedule ends there itself); a 422 naming the fault."""
    try:
        values = [float(v) for v in text.replace(" ", "").split(",") if v]
    except ValueError as exc:
        raise InvalidRequest(
            f"param {param!r} is {text!r}: a comma-separated list of numbers (ManualSigmas')",
            node_id=node_id,
        ) from exc
    if len(values) < 2 or values[-1] != 0.0:
        raise InvalidRequest(
            f"param {param!r} {values} must hold at least one level and end at 0 (the clean video)",
            node_id=node_id,
        )
    if not 0 < values[0] <= 1 or any(b >= a for a, b in zip(values, values[1:], strict=False)):
        raise InvalidRequest(
            f"param {param!r} {values} must fall strictly from at most 1 to 0",
            node_id=node_id,
        )
    return tuple(values[:-1])
