"""`options.cache` at the API: checked at submit (a 422 naming the field, nothing stored), and
kept in its checked form (the stored options travel as the previews' do)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from fastapi.testclient import TestClient
from server_support import slow_graph, text_graph

from inline_core.runtime.context import ExecutionContext
from inline_core.runtime.step_cache import POLICY_CHOICE, StepCacheSettings
from inline_core.server.run_options import parse_options, step_cache_choice


@pytest.mark.parametrize(
    ("cache", "named"),
    [
        ({"method": "teacache"}, "options.cache.method is 'teacache'; choose one of none, dbcache"),
        ({}, "options.cache.method is None"),
        ({"method": "dbcache", "threshold": 2}, "options.cache.threshold is 2; it must be between"),
        ({"method": "dbcache", "threshold": -0.1}, "options.cache.threshold is -0.1"),
        ({"method": "dbcache", "threshold": "0.1"}, "options.cache.threshold must be a number"),
        ({"method": "dbcache", "threshold": True}, "options.cache.threshold must be a number"),
        ({"method": "dbcache", "warmup": 1.5}, "options.cache.warmup must be an integer"),
        ({"method": "dbcache", "warmup": -1}, "options.cache.warmup is -1"),
        ({"method": "dbcache", "frontBlocks": 0}, "options.cache.frontBlocks is 0"),
        ({"method": "dbcache", "maxConsecutive": 0}, "options.cache.maxConsecutive is 0"),
        ({"method": "dbcache", "tresh": 0.1}, "unknown field 'tresh' in options.cache"),
        ({"method": "none", "threshold": 0.1}, "options.cache.threshold has no meaning"),
        ("dbcache", "option 'cache' must be an object"),
    ],
)
def test_a_bad_cache_option_is_a_422_naming_the_field(
    client: TestClient, cache: Any, named: str
) -> None:
    body = {"graph": text_graph(), "target": "t", "options": {"cache": cache}}
    response = client.post("/v1/runs", json=body)
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "invalid_request" and named in error["message"], error
    assert client.get("/v1/runs").json()["runs"] == []  # nothing was stored


def test_a_run_with_a_good_cache_option_is_accepted_and_runs(client: TestClient) -> None:
    cache = {"method": "dbcache", "threshold": 0.12, "warmup": 4}
    body = {"graph": slow_graph(steps=2, delay=0.0), "target": "s", "options": {"cache": cache}}
    response = client.post("/v1/runs", json=body)
    assert response.status_code == 201, response.text
    run_id = response.json()["runId"]
    deadline = time.monotonic() + 30.0  # a liveness bound, not a timing assertion
    while client.get(f"/v1/runs/{run_id}").json()["status"] not in ("done", "error"):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert client.get(f"/v1/runs/{run_id}").json()["status"] == "done"


def test_parsed_options_hold_every_setting_and_give_the_runs_choice() -> None:
    stored = parse_options({"cache": {"method": "dbcache", "threshold": 0.12, "warmup": 4}})
    settings = StepCacheSettings(threshold=0.12, warmup=4)
    assert stored == {"cache": settings.to_json()}
    assert step_cache_choice(stored).settings == settings
    off = parse_options({"cache": {"method": "none"}})
    assert off == {"cache": {"method": "none"}}
    assert step_cache_choice(off).given and step_cache_choice(off).settings is None
    assert not step_cache_choice({}).given
    zero = parse_options({"cache": {"method": "dbcache", "threshold": 0}})
    assert zero["cache"]["threshold"] == 0


def test_a_run_asking_for_nothing_shares_the_policy_choice_and_each_keys_as_before() -> None:
    """The common run's choice is one shared value (nothing worked out per render); the cache
    key part of each choice is what it was."""
    assert step_cache_choice({}) is POLICY_CHOICE
    assert ExecutionContext.__dataclass_fields__["step_cache"].default is POLICY_CHOICE
    assert POLICY_CHOICE.identity == "cache:policy"
    assert step_cache_choice({"cache": {"method": "none"}}).identity == "cache:none"
    settings = StepCacheSettings(threshold=0.12, warmup=4)
    chosen = step_cache_choice(parse_options({"cache": settings.to_json()}))
    assert chosen.identity == "cache:" + json.dumps(settings.to_json(), sort_keys=True)
