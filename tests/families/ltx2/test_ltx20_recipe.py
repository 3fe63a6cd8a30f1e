"""LTX-2.0's two-stage recipe, its official ComfyUI templates' (`versions.py`, from the installed
`comfyui-workflow-templates-json`): `video_ltx2_t2v.json` runs the first pass at 20 steps on
LTXVScheduler (the node's own schedule) under CFGGuider 4, the refining pass on 0.909375, 0.725,
0.421875 unguided, both euler_ancestral; `video_ltx2_i2v.json` the same with euler first and
gradient_estimation refining. Unset params are filled from the template (the image-to-video
one with a first frame), given params win, and the take says whose recipe ran."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from ltx2_harness import PROMPT, first_frame_image, ltx2_rig, node_params

from inline_core.families.ltx2.descriptor import NODE_TYPE
from inline_core.families.ltx2.kit import FOLDER, LTX2Kit
from inline_core.families.ltx2.versions import LTX2, VERSIONS, recipe
from inline_core.sampling.loop import StepLoopSampler

LEFT_TO_THE_MODEL: dict[str, Any] = {"upscale": True, "steps": None}  # sampler, guidances unset


def took(kit: LTX2Kit, loop: StepLoopSampler, image: bool = False, **params: Any) -> dict[str, Any]:
    """The take's params a two-stage render of `params` on the 2.0 kit would carry."""
    rig = ltx2_rig(kit.root, loop)
    asked = node_params(**{**LEFT_TO_THE_MODEL, **params})
    inputs: dict[str, Any] = {"prompt": PROMPT}
    if image:
        inputs["image"] = first_frame_image(32, 32, seed=3)
    lowered = rig.family.lower(NODE_TYPE, asked, inputs, "l", rig.sources(FOLDER))
    return lowered.take_params


def test_text_to_video_fills_what_the_params_leave_with_its_template(
    ltx2_kit: LTX2Kit, ltx2_sampler: StepLoopSampler
) -> None:
    ran = took(ltx2_kit, ltx2_sampler)
    assert ran["model_version"] == LTX2
    assert (ran["steps"], ran["guidance"], ran["audio_guidance"]) == (20, 4.0, 4.0)
    assert (ran["sampler"], ran["refine_sampler"]) == ("euler_ancestral", "euler_ancestral")
    assert ran["refine_sigmas"] == "0.909375, 0.725, 0.421875, 0"
    assert ran["sigma_schedule"] == "simple"  # LTXVScheduler at its published shifts


def test_image_to_video_fills_them_with_its_own_template(
    ltx2_kit: LTX2Kit, ltx2_sampler: StepLoopSampler
) -> None:
    ran = took(ltx2_kit, ltx2_sampler, image=True)
    assert ran["image_to_video"] is True and ran["model_version"] == LTX2
    assert (ran["sampler"], ran["refine_sampler"]) == ("euler", "gradient_estimation")
    assert (ran["steps"], ran["guidance"], ran["audio_guidance"]) == (20, 4.0, 4.0)


def test_given_params_win_over_the_template(
    ltx2_kit: LTX2Kit, ltx2_sampler: StepLoopSampler
) -> None:
    given = {
        "steps": 3,
        "sampler": "euler",
        "guidance": 2.5,
        "audio_guidance": 6.0,
        "refine_sampler": "dpmpp_2m",
        "refine_sigmas": "0.9, 0.5, 0",
    }
    ran = took(ltx2_kit, ltx2_sampler, image=True, **given)
    assert {name: ran[name] for name in given} == given
    one_pass = took(ltx2_kit, ltx2_sampler, upscale=False)  # no template: LTX2Pipeline's own
    assert (one_pass["steps"], one_pass["guidance"], one_pass["audio_guidance"]) == (40, 4.0, 7.0)
    assert one_pass["sampler"] == "euler"


def test_the_row_is_what_the_installed_templates_hold() -> None:
    """Read again from the package's files: each template's first and refining samplers,
    LTXVScheduler's steps, each CFGGuider's cfg and the refining ManualSigmas."""
    for name, image in (("video_ltx2_t2v", False), ("video_ltx2_i2v", True)):
        template = resources.files("comfyui_workflow_templates_json") / "templates" / f"{name}.json"
        nodes = subgraph_nodes(json.loads(template.read_text(encoding="utf-8")))
        first, refine = (sampler_inputs(nodes, n) for n in sampler_nodes(nodes))
        row = recipe(LTX2, image)
        assert (first["sampler"], refine["sampler"]) == (row.sampler, row.refine_sampler)
        assert first["sigmas"][0] == row.steps and first["cfg"] == row.guidance
        assert refine["cfg"] == 1.0
        levels = tuple(float(v) for v in refine["sigmas"][0].split(","))
        assert levels == (*VERSIONS[LTX2].refine_sigmas, 0.0)


def subgraph_nodes(workflow: dict[str, Any]) -> dict[int, dict[str, Any]]:
    (graph,) = workflow["definitions"]["subgraphs"]
    links = {link["id"]: link["origin_id"] for link in graph["links"]}
    nodes = {node["id"]: node for node in graph["nodes"]}
    for node in nodes.values():
        node["from"] = {i["name"]: links.get(i.get("link")) for i in node.get("inputs", [])}
    return nodes


def sampler_nodes(nodes: dict[int, dict[str, Any]]) -> list[int]:
    """The two SamplerCustomAdvanced, the one on LTXVScheduler (the first pass) first."""
    found = [i for i, n in nodes.items() if n["type"] == "SamplerCustomAdvanced"]
    return sorted(found, key=lambda i: nodes[nodes[i]["from"]["sigmas"]]["type"] != "LTXVScheduler")


def sampler_inputs(nodes: dict[int, dict[str, Any]], sampler: int) -> dict[str, Any]:
    inputs = nodes[sampler]["from"]
    return {
        "sampler": nodes[inputs["sampler"]]["widgets_values"][0],
        "cfg": float(nodes[inputs["guider"]]["widgets_values"][0]),
        "sigmas": nodes[inputs["sigmas"]]["widgets_values"],
    }
