"""When a part's weights stay in their file's dtype (`device/storage.py`): a pure function of the
placement, the file's dtype, its size and the budget."""

from __future__ import annotations

from inline_core.device.policy import Placement
from inline_core.device.storage import kept_dtype, kept_reason

GIB = 1024**3
CPU32 = Placement(device="cpu", dtype="float32")
QWEN3_4B = 4_022_468_096  # numbers in the real text encoder: a 15 GiB float32 copy


def test_a_bf16_file_whose_float32_copy_is_over_half_the_budget_is_kept_in_bf16() -> None:
    assert kept_dtype(CPU32, "bfloat16", QWEN3_4B, 8 * GIB) == "bfloat16"
    assert kept_dtype(CPU32, "float16", QWEN3_4B, 16 * GIB) == "float16"
    # 0.9B transformer: a 3.4 GiB copy fits under half of 8 GiB, so it is converted.
    assert kept_dtype(CPU32, "bfloat16", 900_000_000, 8 * GIB) is None


def test_the_rule_needs_a_budget_a_lower_float_file_and_a_plain_cpu_float32_part() -> None:
    assert kept_dtype(CPU32, "bfloat16", QWEN3_4B, None) is None
    assert kept_dtype(CPU32, "float32", QWEN3_4B, 8 * GIB) is None  # already its dtype: mapped
    assert kept_dtype(CPU32, None, QWEN3_4B, 8 * GIB) is None  # quantized or unreadable
    bf16 = Placement(device="cpu", dtype="bfloat16")
    assert kept_dtype(bf16, "bfloat16", QWEN3_4B, 8 * GIB) is None
    for other in (
        Placement(device="cuda", dtype="float32"),
        Placement(device="cpu", dtype="float32", quantize="int8"),
        Placement(device="cpu", dtype="float32", offload=True),
    ):
        assert kept_dtype(other, "bfloat16", QWEN3_4B, 8 * GIB) is None


def test_the_warning_says_what_was_kept_and_why() -> None:
    text = kept_reason("Z-Image text_encoder", CPU32, "bfloat16", QWEN3_4B, 8 * GIB)
    assert "15.0 GiB as a float32 copy" in text and "8.0 GiB memory budget" in text
    assert "stay in the file's bfloat16, mapped" in text


def test_health_shows_a_kept_dtype_only_where_there_is_one() -> None:
    assert "storage" not in CPU32.to_json()
    kept = Placement(device="cpu", dtype="float32", storage="bfloat16")
    assert kept.to_json()["storage"] == "bfloat16"
