"""A run's `options` in `POST /v1/runs`: how it is delivered and how its steps are computed.

`{"preview": "none" | "latent2rgb" | "taesd"}`: its step previews (unset: the server's
`--preview-method`). `{"cache": {"method": "dbcache", "threshold": ..., "warmup": ..., ...}}` or
`{"cache": {"method": "none"}}`: its step caching (unset: the device policy's choice per
render; `runtime/step_cache.py`). Checked at submit (an unknown option or value is a 422 naming
it) and stored with the run, so whichever server claims it, and a re-run after a crash, renders
and delivers it the same way.
Options are not part of the submission's identity: a clientRunId repeated with other options is
the same run, rendered with the options it was first submitted with.
"""

from __future__ import annotations

from typing import Any, cast

from inline_core.errors import InvalidRequest
from inline_core.graph.validate import ValidatedGraph
from inline_core.runtime.preview import PREVIEW_METHODS
from inline_core.runtime.step_cache import POLICY_CHOICE, StepCacheChoice, parse_cache_option

OPTIONS = ("preview", "cache")


def parse_options(raw: object) -> dict[str, Any]:
    """The options as stored (only those given); `InvalidRequest` names a bad one."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise InvalidRequest('\'options\' must be an object, e.g. {"preview": "latent2rgb"}')
    given = cast(dict[str, Any], raw)
    unknown = sorted(k for k in given if k not in OPTIONS)
    if unknown:
        raise InvalidRequest(
            f"unknown option {unknown[0]!r} in 'options'; the options are {', '.join(OPTIONS)}"
        )
    options: dict[str, Any] = {}
    if "preview" in given:
        method = given["preview"]
        if not isinstance(method, str) or method not in PREVIEW_METHODS:
            raise InvalidRequest(
                f"option 'preview' is {method!r}; choose one of {', '.join(PREVIEW_METHODS)}"
            )
        options["preview"] = method
    if "cache" in given:
        settings = parse_cache_option(given["cache"])
        options["cache"] = {"method": "none"} if settings is None else settings.to_json()
    return options


def preview_method(options: dict[str, Any], default: str) -> str:
    """The run's preview method: its own option, else the server's default."""
    method = options.get("preview")
    return method if isinstance(method, str) else default


def step_cache_choice(options: dict[str, Any]) -> StepCacheChoice:
    """The run's step caching as it asked for it (nothing: the device policy chooses)."""
    stored = options.get("cache")
    return POLICY_CHOICE if stored is None else StepCacheChoice(True, parse_cache_option(stored))


def refuse_uncached_steps(options: dict[str, Any], validated: ValidatedGraph) -> None:
    """A run that asks for step caching with a node that denoises without it (a UNet family:
    no DiT step cache) is a 422 naming the node, rather than a render that ignores the ask."""
    cache = options.get("cache")
    if not isinstance(cache, dict) or cast(dict[str, Any], cache).get("method") == "none":
        return
    for node_id in validated.order:
        node = validated.graph.by_id[node_id]
        runner = validated.runners[node_id]
        if runner.samples_steps and not runner.caches_steps:
            raise InvalidRequest(
                f"option 'cache' asks for step caching, which node {node_id!r} ({node.type}) "
                "does not do (its model has no DiT step cache): drop the option, or give "
                '{"method": "none"}',
                node_id=node_id,
            )
