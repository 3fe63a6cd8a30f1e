"""`inline-core import-comfy`: file in, `{graph, target, skipped, warnings}` out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from comfy_workflows import sd_txt2img_ui, zimage_api

from inline_core.graph.schema import parse_graph
from inline_core.importer.cli import main


def test_prints_the_result(
    tmp_path: Path, models_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "workflow.json"
    source.write_text(json.dumps(zimage_api(seed=9)))
    assert main([str(source), "--models-dir", str(models_root)]) == 0
    out, err = capsys.readouterr()
    body = json.loads(out)
    assert body["target"] == "c8"
    assert parse_graph(body["graph"]).node("c3").params["seed"] == 9
    assert (body["skipped"], body["warnings"], err) == ([], [], "")


def test_writes_a_file_and_echoes_warnings(
    tmp_path: Path, models_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, target = tmp_path / "sd.json", tmp_path / "graph.json"
    source.write_text(json.dumps(sd_txt2img_ui()))
    assert main([str(source), "-o", str(target), "--models-dir", str(models_root)]) == 0
    out, err = capsys.readouterr()
    assert out == ""
    body = json.loads(target.read_text())
    assert body["warnings"]
    for warning in body["warnings"]:
        assert f"warning: {warning}" in err


def test_bad_input_exits_2(
    tmp_path: Path, models_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    garbage = tmp_path / "garbage.json"
    garbage.write_text("[1, 2, 3]")
    assert main([str(garbage), "--models-dir", str(models_root)]) == 2
    assert "must be a JSON object" in capsys.readouterr().err
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    assert main([str(broken), "--models-dir", str(models_root)]) == 2
    assert main([str(tmp_path / "missing.json"), "--models-dir", str(models_root)]) == 2
    assert main([str(garbage), "--asset", "no-equals"]) == 2
