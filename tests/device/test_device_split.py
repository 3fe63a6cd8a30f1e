"""The multi-GPU split: parsing INLINE_PARALLEL, validating it, and the automatic choice."""

from __future__ import annotations

import pytest
from device_machines import CPU_BOX, RTX_4090, ZIMAGE, gpus

from inline_core.device import (
    DevicePolicy,
    DeviceSettings,
    HardwareDescription,
    ModelParallelSupport,
    ParallelSpec,
    Profile,
    choose_split,
)
from inline_core.errors import InvalidRequest

# --- parsing ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "canonical", "world"),
    [
        ("ulysses=2", "ulysses=2", 2),
        ("ring=2", "ring=2", 2),
        ("ulysses=2,ring=2", "ulysses=2,ring=2", 4),
        ("ring=4,ulysses=2", "ulysses=2,ring=4", 8),
        (" Ulysses = 2 , RING=3 ", "ulysses=2,ring=3", 6),
        ("pipefusion=2,ulysses=2", "ulysses=2,pipefusion=2", 4),
    ],
)
def test_specs_parse_and_print_canonically(text: str, canonical: str, world: int) -> None:
    spec = ParallelSpec.parse(text)
    assert str(spec) == canonical
    assert spec.world_size == world
    assert spec.is_split
    assert ParallelSpec.parse(canonical) == spec


@pytest.mark.parametrize("text", ["off", "none", "OFF", " 1 "])
def test_off_asks_for_no_split(text: str) -> None:
    spec = ParallelSpec.parse(text)
    assert spec == ParallelSpec()
    assert (spec.world_size, spec.is_split, str(spec)) == (1, False, "off")


def test_degrees_and_methods_read_back() -> None:
    spec = ParallelSpec.of(ring=2, ulysses=3)
    assert (spec.degree("ulysses"), spec.degree("ring"), spec.degree("pipefusion")) == (3, 2, 1)
    assert spec.methods == frozenset({"ulysses", "ring"})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "expected method=degree pairs"),
        ("ulysses", "expected method=degree pairs"),
        ("ulysses=", "expected method=degree pairs"),
        ("=2", "expected method=degree pairs"),
        ("ulysses=2,", "expected method=degree pairs"),
        ("tensor=2", "unknown method 'tensor'; methods: ulysses, ring, pipefusion"),
        ("ulysses=two", "degree 'two' is not an integer"),
        ("ulysses=1", "at least 2 .use INLINE_PARALLEL=off for no split"),
        ("ulysses=0", "at least 2"),
        ("ring=-2", "at least 2"),
        ("ulysses=2,ulysses=2", "ulysses is given twice"),
    ],
)
def test_malformed_specs_are_clear_errors(text: str, message: str) -> None:
    with pytest.raises(InvalidRequest, match=message) as info:
        ParallelSpec.parse(text)
    assert info.value.message.startswith(f"INLINE_PARALLEL={text!r}")


def test_specs_built_in_code_are_checked_too() -> None:
    with pytest.raises(ValueError, match="unknown parallel method"):
        ParallelSpec.of(tensor=2)
    with pytest.raises(ValueError, match=">= 2"):
        ParallelSpec.of(ring=1)
    with pytest.raises(ValueError, match="twice"):
        ParallelSpec((("ring", 2), ("ring", 2)))
    with pytest.raises(ValueError, match="unknown parallel methods"):
        ModelParallelSupport(family="x", methods=frozenset({"tensor"}))


def test_zimage_ulysses_degrees_are_the_divisors_of_30() -> None:
    assert ZIMAGE.ulysses_degrees == (2, 3, 5, 6, 10, 15, 30)
    assert ModelParallelSupport(family="x", methods=frozenset({"ulysses"})).ulysses_degrees == ()


# --- the automatic choice ---------------------------------------------------------------------


def test_no_split_on_cpu_or_a_single_gpu_unless_asked() -> None:
    assert choose_split(CPU_BOX, ZIMAGE) is None
    assert choose_split(RTX_4090, ZIMAGE) is None
    assert choose_split(gpus(1, nvlink=False), ZIMAGE) is None


@pytest.mark.parametrize(
    ("count", "expected"),
    [(2, "ulysses=2"), (4, "ulysses=2,ring=2"), (8, "ulysses=2,ring=4"), (16, "ulysses=2,ring=8")],
)  # fmt: skip
def test_nvlink_prefers_ulysses_within_the_heads_and_rings_the_rest(
    count: int, expected: str
) -> None:
    spec = choose_split(gpus(count, nvlink=True), ZIMAGE)
    assert spec is not None
    assert str(spec) == expected
    assert spec.world_size == count  # every GPU is used


@pytest.mark.parametrize(("count", "expected"), [(3, "ulysses=2"), (6, "ulysses=2,ring=2")])
def test_zimage_uses_the_most_gpus_its_32_token_blocks_divide_among(
    count: int, expected: str
) -> None:
    # 3 or 6 ranks would leave a remainder of every 32-token block: cache-dit refuses it and
    # xDiT attends to the padding. The split runs on the first 2 or 4 GPUs instead.
    spec = choose_split(gpus(count, nvlink=True), ZIMAGE)
    assert str(spec) == expected
    assert choose_split(gpus(count, nvlink=False), ZIMAGE) == ParallelSpec.of(
        ring=2 if count == 3 else 4
    )


@pytest.mark.parametrize("count", [2, 4, 8])
def test_pcie_prefers_ring(count: int) -> None:
    assert choose_split(gpus(count, nvlink=False), ZIMAGE) == ParallelSpec.of(ring=count)


def test_a_ulysses_only_family_uses_the_most_gpus_its_heads_allow() -> None:
    ulysses_only = ModelParallelSupport(family="u", methods=frozenset({"ulysses"}), heads=30)
    for nvlink in (True, False):
        assert str(choose_split(gpus(4, nvlink=nvlink), ulysses_only)) == "ulysses=3"
        assert str(choose_split(gpus(8, nvlink=nvlink), ulysses_only)) == "ulysses=6"
    any_heads = ModelParallelSupport(family="u", methods=frozenset({"ulysses"}))
    assert str(choose_split(gpus(4, nvlink=False), any_heads)) == "ulysses=4"


def test_heads_that_no_degree_divides_fall_back_to_ring() -> None:
    odd = ModelParallelSupport(family="odd", methods=frozenset({"ulysses", "ring"}), heads=15)
    assert str(choose_split(gpus(4, nvlink=True), odd)) == "ring=4"


def test_a_family_that_cannot_combine_them_gets_one_exact_method_on_every_gpu() -> None:
    apart = ModelParallelSupport(
        family="apart", methods=frozenset({"ulysses", "ring"}), heads=24, ulysses_with_ring=False
    )
    assert str(choose_split(gpus(8, nvlink=True), apart)) == "ulysses=8"
    assert str(choose_split(gpus(16, nvlink=True), apart)) == "ring=16"  # not ulysses=8,ring=2


def test_pipefusion_only_when_nothing_exact_is_supported() -> None:
    both = ModelParallelSupport(family="f", methods=frozenset({"ring", "pipefusion"}))
    assert str(choose_split(gpus(2, nvlink=False), both)) == "ring=2"
    pipe = ModelParallelSupport(family="p", methods=frozenset({"pipefusion"}))
    assert str(choose_split(gpus(2, nvlink=False), pipe)) == "pipefusion=2"
    nothing = ModelParallelSupport(family="n", methods=frozenset())
    assert choose_split(gpus(4, nvlink=True), nothing) is None


def test_the_cpu_profile_on_a_gpu_machine_starts_no_ranks_by_itself() -> None:
    assert choose_split(gpus(4, nvlink=True), ZIMAGE, profile=Profile.CPU) is None


# --- explicit overrides -----------------------------------------------------------------------


def test_an_override_that_fits_is_used_as_given() -> None:
    four = gpus(4, nvlink=False)
    spec = ParallelSpec.parse("ulysses=2,ring=2")
    assert choose_split(four, ZIMAGE, spec) == spec
    assert choose_split(four, ZIMAGE, ParallelSpec.parse("ring=4")) == ParallelSpec.of(ring=4)


def test_off_keeps_a_multi_gpu_machine_in_process() -> None:
    assert choose_split(gpus(4, nvlink=True), ZIMAGE, ParallelSpec.parse("off")) is None


def test_cpu_ranks_run_any_product_under_the_cpu_profile() -> None:
    spec = ParallelSpec.parse("ulysses=2")
    assert choose_split(CPU_BOX, ZIMAGE, spec) == spec
    assert choose_split(CPU_BOX, ZIMAGE, ParallelSpec.parse("ulysses=2,ring=4")) is not None
    forced = choose_split(gpus(4, nvlink=True), ZIMAGE, spec, profile=Profile.CPU)
    assert forced == spec


@pytest.mark.parametrize(
    ("hw", "text", "message"),
    [
        (gpus(4, nvlink=True), "ulysses=2", r"needs 2 ranks .one per GPU. but found 4 usable GPUs"),
        (gpus(2, nvlink=True), "ulysses=2,ring=2", "needs 4 ranks"),
        (RTX_4090, "ulysses=2", "found 1 usable GPU: .*INLINE_PROFILE=cpu"),
    ],
)
def test_a_degree_product_that_misses_the_gpu_count_is_an_error(
    hw: HardwareDescription, text: str, message: str
) -> None:
    with pytest.raises(InvalidRequest, match=message):
        choose_split(hw, ZIMAGE, ParallelSpec.parse(text))


def test_pipefusion_for_zimage_names_the_supported_methods() -> None:
    with pytest.raises(InvalidRequest, match="z-image cannot be split with pipefusion; "
                       "supported methods: ulysses, ring"):  # fmt: skip
        choose_split(gpus(2, nvlink=False), ZIMAGE, ParallelSpec.parse("pipefusion=2"))


@pytest.mark.parametrize("text", ["ring=3", "ulysses=3", "ulysses=2,ring=3", "ring=5"])
def test_ranks_not_dividing_the_32_token_blocks_are_refused(text: str) -> None:
    with pytest.raises(
        InvalidRequest, match="z-image pads its token sequence to multiples of 32, so ulysses x "
        r"ring must divide 32 \(\d+ does not\); allowed: 2, 4, 8, 16, 32"
    ):  # fmt: skip
        choose_split(CPU_BOX, ZIMAGE, ParallelSpec.parse(text))


@pytest.mark.parametrize("text", ["ulysses=4", "ulysses=8", "ulysses=4,ring=2"])
def test_a_ulysses_degree_not_dividing_the_heads_names_the_allowed_ones(text: str) -> None:
    spec = ParallelSpec.parse(text)
    hw = gpus(spec.world_size, nvlink=True)
    with pytest.raises(
        InvalidRequest, match="must divide the 30 attention heads of z-image; "
        "allowed ulysses degrees: 2, 3, 5, 6, 10, 15, 30"
    ):  # fmt: skip
        choose_split(hw, ZIMAGE, spec)


# --- through the policy -----------------------------------------------------------------------


def test_the_policy_splits_per_family_and_checks_ranks_at_construction() -> None:
    eight = gpus(8, nvlink=True)
    assert str(DevicePolicy(eight).split_for(ZIMAGE)) == "ulysses=2,ring=4"
    with pytest.raises(InvalidRequest, match="needs 2 ranks"):
        DevicePolicy(eight, DeviceSettings(parallel=ParallelSpec.of(ulysses=2)))
    cpu = DevicePolicy(CPU_BOX, DeviceSettings(parallel=ParallelSpec.of(ulysses=2)))
    assert cpu.split_for(ZIMAGE) == ParallelSpec.of(ulysses=2)
    bad_method = DevicePolicy(CPU_BOX, DeviceSettings(parallel=ParallelSpec.of(pipefusion=2)))
    with pytest.raises(InvalidRequest, match="supported methods: ulysses, ring"):
        bad_method.split_for(ZIMAGE)
