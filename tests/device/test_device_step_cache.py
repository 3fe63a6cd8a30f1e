"""The device policy's step caching for renders that ask for nothing: off for the 8-step Turbo,
cache-dit's DBCache defaults from 20 steps, never for a family without a step cache."""

from __future__ import annotations

from device_machines import CPU_BOX, RTX_4090

from inline_core.device import DevicePolicy
from inline_core.runtime.step_cache import StepCacheSettings

DBCACHE = frozenset({"dbcache"})


def test_caching_pays_from_20_steps_and_is_off_below() -> None:
    for hardware in (CPU_BOX, RTX_4090):
        policy = DevicePolicy(hardware)
        assert policy.step_cache(DBCACHE, 8) is None  # Z-Image Turbo's default
        assert policy.step_cache(DBCACHE, 19) is None
        assert policy.step_cache(DBCACHE, 20) == StepCacheSettings()
        assert policy.step_cache(DBCACHE, 50) == StepCacheSettings()
        assert policy.step_cache(frozenset(), 50) is None  # the family adopts no step cache


def test_health_states_the_rule() -> None:
    rule = DevicePolicy(RTX_4090).describe()["stepCache"]
    assert rule == {"fromSteps": 20, **StepCacheSettings().to_json()}
