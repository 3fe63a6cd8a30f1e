"""`inline-core import-comfy`: file in, `{graph, target, skipped, warnings}` out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from comfy_workflows import ZIMAGE_MODEL, sd_txt2img_ui, zimage_api

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
    mapped = "--model=v1-5-pruned-emaonly.safetensors=z_image_turbo_bf16.safetensors"
    assert main([str(source), "-o", str(target), "--models-dir", str(models_root), mapped]) == 0
    out, err = capsys.readouterr()
    assert out == ""
    body = json.loads(target.read_text())
    assert body["family"] == {"name": "z-image", "title": "Z-Image"}
    assert body["warnings"]
    for warning in body["warnings"]:
        assert f"warning: {warning}" in err
    assert "warning: changes the picture: this workflow is built for Stable Diffusion 1.5" in err


def test_a_workflow_for_another_family_exits_2_naming_it_and_the_mapping(
    tmp_path: Path, models_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "sd.json"
    source.write_text(json.dumps(sd_txt2img_ui()))
    assert main([str(source), "--models-dir", str(models_root)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert "built for Stable Diffusion 1.5 (CheckpointLoaderSimple 4" in err
    assert "--model WORKFLOW_FILE=CATALOG_FILE" in err
    assert "'z_image_turbo_bf16.safetensors'" in err  # the candidate to map onto
    # A mapping onto a file the catalog does not hold is refused, naming what it holds.
    wrong = "--model=v1-5-pruned-emaonly.safetensors=nope.safetensors"
    assert main([str(source), "--models-dir", str(models_root), wrong]) == 2
    refusal = "'nope.safetensors', which is not in checkpoints/ or diffusion_models/"
    assert refusal in capsys.readouterr().err


def test_a_model_that_is_not_there_lists_the_candidates(
    tmp_path: Path, models_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workflow = zimage_api()
    workflow["16"]["inputs"]["unet_name"] = "z_image_turbo_fp8.safetensors"
    (models_root / "diffusion_models" / "z-image-distilled.safetensors").write_bytes(b"x")
    source = tmp_path / "workflow.json"
    source.write_text(json.dumps(workflow))
    assert main([str(source), "--models-dir", str(models_root)]) == 0
    out, err = capsys.readouterr()
    [unmatched] = json.loads(out)["unmatchedModels"]
    assert unmatched["file"] == "z_image_turbo_fp8.safetensors"
    assert unmatched["category"] == "diffusion_models" and unmatched["using"] is None
    assert unmatched["candidates"] == [
        "z-image-distilled.safetensors",
        "z_image_turbo_bf16.safetensors",
    ]
    assert "candidates: z-image-distilled.safetensors, z_image_turbo_bf16.safetensors" in err
    mapped = "--model=z_image_turbo_fp8.safetensors=z_image_turbo_bf16.safetensors"
    assert main([str(source), "--models-dir", str(models_root), mapped]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["unmatchedModels"] == []
    assert parse_graph(body["graph"]).node("c16").params["file"] == ZIMAGE_MODEL


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
