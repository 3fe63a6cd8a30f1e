from __future__ import annotations

import os
from pathlib import Path

import pytest
from graph_harness import Harness, graph, node

from inline_core.errors import RunFailed
from inline_core.graph.cache import NodeCache, key_for
from inline_core.graph.primitives import LOAD_DIFFUSION_MODEL
from inline_core.runtime.progress import NodeDone


def _cached(h: Harness) -> dict[str, bool]:
    return {e.node_id: e.cached for e in h.events if isinstance(e, NodeDone)}


def test_second_run_hits_and_a_changed_param_misses_downstream_only(h: Harness) -> None:
    cache = NodeCache()
    raw = graph(
        node("t", "input/text", {"text": "hi"}),
        node("e1", "test/echo", {"suffix": "1"}, text="t.text"),
        node("e2", "test/echo", {"suffix": "2"}, text="e1.text"),
    )
    assert h.execute(raw, "e2", cache=cache).outputs == {"text": "hi12"}
    h.events.clear()
    assert h.execute(raw, "e2", cache=cache).outputs == {"text": "hi12"}
    assert _cached(h) == {"t": True, "e1": True, "e2": True}
    assert h.echo.runs == ["e1", "e2"]

    raw["nodes"][2]["params"]["suffix"] = "3"
    h.events.clear()
    assert h.execute(raw, "e2", cache=cache).outputs == {"text": "hi13"}
    assert _cached(h) == {"t": True, "e1": True, "e2": False}

    raw["nodes"][0]["params"]["text"] = "yo"
    h.events.clear()
    assert h.execute(raw, "e2", cache=cache).outputs == {"text": "yo13"}
    assert _cached(h) == {"t": False, "e1": False, "e2": False}


def test_a_default_written_out_hits_the_same_entry(h: Harness) -> None:
    cache = NodeCache()
    h.execute(graph(node("e", "test/echo")), "e", cache=cache)
    h.events.clear()
    h.execute(graph(node("e", "test/echo", {"suffix": ""})), "e", cache=cache)
    assert _cached(h) == {"e": True}


def test_replacing_a_model_file_changes_the_key(h: Harness) -> None:
    path = h.model_file("z.safetensors", b"one")
    params = {"file": "z.safetensors"}
    first = key_for(LOAD_DIFFUSION_MODEL, params, {}, h.catalog)
    assert key_for(LOAD_DIFFUSION_MODEL, params, {}, h.catalog) == first
    path.write_bytes(b"two!")  # a different size
    h.catalog.rescan()
    second = key_for(LOAD_DIFFUSION_MODEL, params, {}, h.catalog)
    assert second != first
    os.utime(path, ns=(1, 1))  # same size, another mtime
    h.catalog.rescan()
    assert key_for(LOAD_DIFFUSION_MODEL, params, {}, h.catalog) not in {first, second}

    cache = NodeCache()
    raw = graph(node("l", "test/load", params))
    h.execute(raw, "l", cache=cache)
    h.execute(raw, "l", cache=cache)
    assert h.load.runs == 1
    path.write_bytes(b"three")
    h.catalog.rescan()
    h.execute(raw, "l", cache=cache)
    assert h.load.runs == 2


def test_upstream_keys_and_ports_are_part_of_the_key(h: Harness) -> None:
    d = LOAD_DIFFUSION_MODEL
    h.model_file("z.safetensors")
    p = {"file": "z.safetensors"}
    base = key_for(d, p, {"x": [("k1", "out")]}, h.catalog)
    assert key_for(d, p, {"x": [("k2", "out")]}, h.catalog) != base
    assert key_for(d, p, {"x": [("k1", "other")]}, h.catalog) != base
    assert key_for(d, p, {"y": [("k1", "out")]}, h.catalog) != base
    assert key_for(d, p, {"x": [("k1", "out")]}, h.catalog, "runner-v2") != base
    two = key_for(d, p, {"x": [("k1", "out"), ("k2", "out")]}, h.catalog)
    assert key_for(d, p, {"x": [("k2", "out"), ("k1", "out")]}, h.catalog) != two


def test_media_refs_key_by_id(h: Harness) -> None:
    cache = NodeCache()
    raw = graph(node("img", "input/image", {"asset": h.asset("a1", (4, 4))}))
    h.execute(raw, "img", cache=cache)
    h.execute(raw, "img", cache=cache)
    raw["nodes"][0]["params"]["asset"] = h.asset("a2", (4, 4))
    h.events.clear()
    h.execute(raw, "img", cache=cache)
    assert _cached(h) == {"img": False}


def test_uncacheable_nodes_and_everything_downstream_always_run(h: Harness) -> None:
    cache = NodeCache()
    raw = graph(node("v", "test/volatile"), node("e", "test/echo", text="v.text"))
    assert h.execute(raw, "e", cache=cache).outputs == {"text": "v1"}
    assert h.execute(raw, "e", cache=cache).outputs == {"text": "v2"}
    assert h.volatile.runs == 2
    assert h.echo.runs == ["e", "e"]


def test_failures_are_not_cached(h: Harness) -> None:
    cache = NodeCache()
    raw = graph(node("t", "input/text"), node("bad", "test/fail", text="t.text"))
    for _ in range(2):
        with pytest.raises(RunFailed):
            h.execute(raw, "bad", cache=cache)
    assert len(cache) == 1  # only the text source


def test_lru_is_bounded_and_keeps_the_recently_used() -> None:
    cache = NodeCache(max_entries=2)
    cache.put("a", {"x": 1})
    cache.put("b", {"x": 2})
    assert cache.get("a") == {"x": 1}
    cache.put("c", {"x": 3})
    assert "a" in cache and "c" in cache and "b" not in cache
    assert len(cache) == 2
    assert cache.get("b") is None
    assert (cache.hits, cache.misses) == (1, 1)


def test_a_cached_media_node_gives_each_run_its_own_take_with_the_same_bytes(h: Harness) -> None:
    cache = NodeCache()
    raw = graph(
        node("i", "input/image", {"asset": h.asset("a1", (40, 30))}),
        node("r", "image/resize", {"width": 20, "height": 20, "mode": "stretch"}, image="i.image"),
    )
    first = h.execute(raw, "r", cache=cache, ctx=h.ctx("run-a"))
    h.events.clear()
    second = h.execute(raw, "r", cache=cache, ctx=h.ctx("run-b"))
    assert _cached(h) == {"i": True, "r": True}
    assert len(first.takes) == len(second.takes) == 1
    a, b = first.takes[0], second.takes[0]
    assert (a.run_id, b.run_id) == ("run-a", "run-b")
    assert a.id != b.id and a.path != b.path
    assert a.hash == b.hash and a.params == b.params
    with open(a.path, "rb") as fa, open(b.path, "rb") as fb:
        assert fa.read() == fb.read()


def test_a_reissued_take_shares_the_cached_file_and_outlives_it(h: Harness) -> None:
    cache = NodeCache()
    raw = graph(
        node("i", "input/image", {"asset": h.asset("a1", (40, 30))}),
        node("r", "image/resize", {"width": 20, "height": 20, "mode": "stretch"}, image="i.image"),
    )
    a = h.execute(raw, "r", cache=cache, ctx=h.ctx("run-a")).takes[0]
    b = h.execute(raw, "r", cache=cache, ctx=h.ctx("run-b")).takes[0]
    # One file under two names: a cache hit reads, hashes and writes no bytes again.
    assert os.stat(a.path).st_ino == os.stat(b.path).st_ino
    kept = Path(b.path).read_bytes()
    os.unlink(a.path)  # the first run's take removed: the second's stays whole
    with open(b.path, "rb") as fb:
        assert fb.read() == kept
    assert not [p for p in os.listdir(h.store.root) if p.startswith(".tmp-")]


def test_a_take_is_copied_where_the_file_system_cannot_link_it(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = NodeCache()
    raw = graph(
        node("i", "input/image", {"asset": h.asset("a1", (40, 30))}),
        node("r", "image/resize", {"width": 20, "height": 20, "mode": "stretch"}, image="i.image"),
    )
    a = h.execute(raw, "r", cache=cache, ctx=h.ctx("run-a")).takes[0]

    def no_links(source: object, target: object) -> None:
        raise OSError(95, "Operation not supported")  # e.g. a FAT or SMB take folder

    monkeypatch.setattr(os, "link", no_links)
    b = h.execute(raw, "r", cache=cache, ctx=h.ctx("run-b")).takes[0]
    assert os.stat(a.path).st_ino != os.stat(b.path).st_ino
    assert a.hash == b.hash
    with open(a.path, "rb") as fa, open(b.path, "rb") as fb:
        assert fa.read() == fb.read()
