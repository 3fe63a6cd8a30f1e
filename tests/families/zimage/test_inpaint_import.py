"""Imported ComfyUI inpaint workflows render the pixels of the direct graphs: VAEEncodeForInpaint,
SetLatentNoiseMask (behind mask ops) and InpaintModelConditioning onto the inpaint primitives,
and a control model's mask onto `load/controlnet`'s, where a ZImageFunControlnet inpaint renders
what the Z-Image node's control inpaint renders (diffusers' ZImageControlNetInpaintPipeline)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import pytest
from comfy_zimage import KIT_FILES
from control_harness import UNION, UNION_21, edges, mask, source
from fastapi.testclient import TestClient
from PIL import Image
from primitive_graphs import edge, primitive_graph
from test_control_server import upload
from test_primitives_comfy import run, serve, take_pixels
from zimage_harness import max_diff

from inline_core.families.zimage.descriptor import NODE_TYPE
from inline_core.families.zimage.kit import KitPaths
from tests.importer import comfy_inpaint
from tests.importer.comfy_inpaint import MASK, PHOTO

Json = dict[str, Any]
PROMPT, SEED, STEPS = "a red fox", 42, 4


@pytest.fixture(scope="module")
def client(kit: KitPaths, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    with serve(kit.root, tmp_path_factory.mktemp("inpaint") / "data") as c:
        yield c


def photo() -> Image.Image:
    """The source photo with its middle transparent: LoadImage's MASK repaints it."""
    out = source().convert("RGBA")
    out.putalpha(Image.eval(mask(), lambda v: 255 - v))
    return out


@pytest.fixture(scope="module")
def assets(client: TestClient) -> dict[str, Json]:
    return {PHOTO: upload(client, photo()), MASK: upload(client, mask())}


def imported(client: TestClient, workflow: Json, assets: dict[str, Json]) -> Json:
    ids = {name: ref["id"] for name, ref in assets.items()}
    response = client.post("/v1/import/comfy", json={"workflow": workflow, "assets": ids})
    assert response.status_code == 200, response.text
    body = cast(Json, response.json())
    assert body["skipped"] == [] and body["changesPicture"] == [], body
    return body


def rendered(client: TestClient, graph: Json, target: str) -> Any:
    return take_pixels(client, run(client, graph, target))


def direct(extra: list[Json], latent: str, *, model: str = "model") -> Json:
    """The primitive graph of the template's render, sampling from `latent` with `model`."""
    graph = primitive_graph(PROMPT, steps=STEPS, seed=SEED)
    nodes = cast(list[Json], graph["nodes"])
    nodes[:] = [n for n in nodes if n["id"] != "latent"] + extra
    sample = next(n for n in nodes if n["id"] == "sample")
    sample["inputs"]["latent"] = edge(latent, "latent")
    sample["inputs"]["model"] = edge(model, "model")
    return graph


def node(node_id: str, node_type: str, params: Json | None = None, **inputs: str) -> Json:
    wired = {port: edge(*spec.split(".")) for port, spec in inputs.items()}
    return {"id": node_id, "type": node_type, "params": params or {}, "inputs": wired}


def image(assets: dict[str, Json], node_id: str = "photo") -> Json:
    return node(node_id, "input/image", {"asset": assets[PHOTO]})


def alpha(assets: dict[str, Json]) -> Json:
    params = {"asset": assets[PHOTO], "channel": "alpha", "invert": True}
    return node("alpha", "input/mask", params)


def template(**fields: Any) -> Json:
    return {
        "prompt": PROMPT,
        "seed": SEED,
        "steps": STEPS,
        "width": 64,
        "height": 64,
        **KIT_FILES,
        **fields,
    }


def test_imported_inpaint_workflows_render_the_direct_graphs_pixels(
    client: TestClient, assets: dict[str, Json]
) -> None:
    encode = [
        image(assets),
        alpha(assets),
        node(
            "inpaint",
            "vae/encode-inpaint",
            {"grow": 6},
            vae="vae.vae",
            image="photo.image",
            mask="alpha.mask",
        ),
    ]
    grown = [
        image(assets),
        node("encode", "vae/encode", vae="vae.vae", image="photo.image"),
        node("red", "input/mask", {"asset": assets[MASK], "channel": "red", "invert": False}),
        node("grow", "mask/grow", {"expand": 2, "tapered_corners": False}, mask="red.mask"),
        node("inv", "mask/invert", mask="grow.mask"),
        node("cut", "mask/threshold", {"value": 0.5}, mask="inv.mask"),
        node("back", "mask/invert", mask="cut.mask"),
        node("masked", "latent/noise-mask", latent="encode.latent", mask="back.mask"),
    ]
    conditioned = [
        image(assets),
        alpha(assets),
        node("encode", "vae/encode", vae="vae.vae", image="photo.image"),
        node("masked", "latent/noise-mask", latent="encode.latent", mask="alpha.mask"),
    ]
    cases = [
        (comfy_inpaint.encode_for_inpaint(**template()), direct(encode, "inpaint")),
        (comfy_inpaint.noise_mask(**template()), direct(grown, "masked")),
        (comfy_inpaint.model_conditioning(**template()), direct(conditioned, "masked")),
    ]
    plain = rendered(client, primitive_graph(PROMPT, steps=STEPS, seed=SEED), "decode")
    for workflow, graph in cases:
        body = imported(client, workflow, assets)
        ours = rendered(client, body["graph"], body["target"])
        assert max_diff(ours, rendered(client, graph, "decode")) == 0
        assert max_diff(ours, plain) > 10  # it sampled from the photo, not from nothing


def test_an_imported_control_inpaint_renders_the_nodes_control_inpaint(
    client: TestClient, assets: dict[str, Json]
) -> None:
    # ZImageFunControlnet: the edges as the control image, the photo to inpaint, its alpha's
    # mask; from noise, as the node inpaints through a 2.x control model.
    workflow = comfy_inpaint.control_inpaint(UNION_21, fun=True, **template())
    workflow["41"] = {"class_type": "LoadImage", "inputs": {"image": "edges.png"}}
    workflow["42"]["inputs"]["image"] = ["41", 0]
    with_edges = assets | {"edges.png": upload(client, edges())}
    body = imported(client, workflow, with_edges)
    ours = rendered(client, body["graph"], body["target"])
    nodes = [
        {"id": "p", "type": "input/text", "params": {"text": PROMPT}},
        image(assets, "image"),
        alpha(assets),
        node("edges", "input/image", {"asset": with_edges["edges.png"]}),
        {
            "id": "z",
            "type": NODE_TYPE,
            "params": {
                "model": KIT_FILES["model"],
                "width": 64,
                "height": 64,
                "steps": STEPS,
                "seed": SEED,
                "guidance": 0.0,
                "controlnet": UNION_21,
                "control_strength": 0.8,
            },
            "inputs": {
                "prompt": edge("p", "text"),
                "image": edge("image", "image"),
                "mask": edge("alpha", "mask"),
                "control_image": edge("edges", "image"),
            },
        },
    ]
    state = run(client, {"schemaVersion": 1, "nodes": nodes}, "z")
    assert state["takes"][0]["params"]["inpaint"] == "control"
    assert max_diff(ours, take_pixels(client, state)) == 0

    # QwenImageDiffsynthControlnet's mask: its masked image is mid-gray (it takes no image to
    # inpaint), here as in ComfyUI.
    qwen = imported(client, comfy_inpaint.control_inpaint(UNION_21, **template()), assets)
    graph = direct(
        [
            image(assets),
            alpha(assets),
            node(
                "control",
                "load/controlnet",
                {"name": UNION_21, "strength": 0.8},
                model="model.model",
                vae="vae.vae",
                image="photo.image",
                mask="alpha.mask",
            ),
            node("latent", "latent/empty", {"width": 64, "height": 64, "batch": 1}),
        ],
        "latent",
        model="control",
    )
    assert (
        max_diff(rendered(client, qwen["graph"], qwen["target"]), rendered(client, graph, "decode"))
        == 0
    )


def test_a_control_mask_on_a_model_without_inpaint_channels_is_refused_at_submit(
    client: TestClient, assets: dict[str, Json]
) -> None:
    """A mask or an image to inpaint on a 1.x control file (control latents only) is a 422 at
    submit naming the file and saying to use a 2.x one, and so is a control with neither a
    control image nor an image to inpaint: nothing is stored."""

    def on_union(**wired: str) -> Json:
        patch = node(
            "control",
            "load/controlnet",
            {"name": UNION, "strength": 0.8},
            model="model.model",
            vae="vae.vae",
            **wired,
        )
        latent = node("latent", "latent/empty", {"width": 64, "height": 64, "batch": 1})
        return direct([image(assets), alpha(assets), patch, latent], "latent", model="control")

    before = client.get("/v1/runs").json()["runs"]
    for wired, words in [
        ({"image": "photo.image", "mask": "alpha.mask"}, (f"controlnet/{UNION}", "2.x")),
        ({"inpaint_image": "photo.image"}, (f"controlnet/{UNION}", "2.x")),
        ({"image": "photo.image", "inpaint_image": "photo.image"}, ("no inpaint mask", "2.x")),
        ({"mask": "alpha.mask"}, ("needs a control image",)),
    ]:
        response = client.post("/v1/runs", json={"graph": on_union(**wired), "target": "decode"})
        assert response.status_code == 422, (wired, response.text)
        error = response.json()["error"]
        assert error["nodeId"] == "control", error
        assert all(word in error["message"] for word in words), (wired, error)
    assert client.get("/v1/runs").json()["runs"] == before  # nothing was stored


def test_a_control_mask_on_a_model_without_inpaint_channels_is_left_out_at_import(
    client: TestClient, assets: dict[str, Json]
) -> None:
    """ComfyUI ignores a control patch's mask with a 1.x file: the import leaves it out, saying
    so, and renders what the graph without it renders; with only an image to inpaint there is
    nothing to control with, and the import is refused."""
    body = imported(client, comfy_inpaint.control_inpaint(UNION, **template()), assets)
    assert any("mask are left out" in w and UNION in w for w in body["warnings"]), body
    [patch] = [n for n in body["graph"]["nodes"] if n["type"] == "load/controlnet"]
    assert set(patch["inputs"]) == {"model", "vae", "image"}
    graph = direct(
        [
            image(assets),
            node(
                "control",
                "load/controlnet",
                {"name": UNION, "strength": 0.8},
                model="model.model",
                vae="vae.vae",
                image="photo.image",
            ),
            node("latent", "latent/empty", {"width": 64, "height": 64, "batch": 1}),
        ],
        "latent",
        model="control",
    )
    ours = rendered(client, body["graph"], body["target"])
    assert max_diff(ours, rendered(client, graph, "decode")) == 0

    ids = {name: ref["id"] for name, ref in assets.items()}
    fun = comfy_inpaint.control_inpaint(UNION, fun=True, **template())
    response = client.post("/v1/import/comfy", json={"workflow": fun, "assets": ids})
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "unsupported_node" and UNION in error["message"], error


def test_a_control_model_that_inpaints_gets_comfyuis_mid_gray_without_a_mask(
    client: TestClient, assets: dict[str, Json]
) -> None:
    """A 2.x control model with a control image only, as ComfyUI's patch feeds it: its inpaint
    channels are a mid-gray image's latents and nothing kept (not diffusers' zeros), which is
    what a mask that repaints everything gives it, pixel for pixel."""
    white = upload(client, Image.new("L", (64, 64), 255))

    def on_union_21(*extra: Json, **wired: str) -> Json:
        patch = node(
            "control",
            "load/controlnet",
            {"name": UNION_21, "strength": 0.8},
            model="model.model",
            vae="vae.vae",
            image="photo.image",
            **wired,
        )
        latent = node("latent", "latent/empty", {"width": 64, "height": 64, "batch": 1})
        return direct([image(assets), *extra, patch, latent], "latent", model="control")

    everywhere = node("white", "input/mask", {"asset": white, "channel": "red", "invert": False})
    alone = rendered(client, on_union_21(), "decode")
    repaints_all = rendered(client, on_union_21(everywhere, mask="white.mask"), "decode")
    assert max_diff(alone, repaints_all) == 0


def test_inpaint_model_conditionings_mask_is_cropped_with_its_pixels(client: TestClient) -> None:
    """A photo whose size is not a multiple of the VAE's: `vae/encode` centre-crops it, and
    InpaintModelConditioning's mask is cropped with it, as ComfyUI crops it, not stretched over
    the cropped latent: the import renders what a plain noise mask cut to the crop renders."""
    size, inner = 72, 64  # the kit's VAE takes multiples of 16: 4 pixels off each side
    repaint = Image.new("L", (size, size), 0)
    # The left strip repaints. Stretched over the cropped latent its edge would move: the 8
    # latent columns sample pixels 9k + 4 of the photo, cropped ones 8k + 7.5 (k = 6: 58, 55.5).
    repaint.paste(255, (0, 0, 57, size))
    wide = source(size, size).convert("RGBA")
    wide.putalpha(Image.eval(repaint, lambda v: 255 - v))
    photo_ref = upload(client, wide)
    crop = (size - inner) // 2
    cut = upload(client, repaint.crop((crop, crop, crop + inner, crop + inner)))
    body = imported(client, comfy_inpaint.model_conditioning(**template()), {PHOTO: photo_ref})
    graph = direct(
        [
            node("photo", "input/image", {"asset": photo_ref}),
            node("encode", "vae/encode", vae="vae.vae", image="photo.image"),
            node("cut", "input/mask", {"asset": cut, "channel": "red", "invert": False}),
            node("masked", "latent/noise-mask", latent="encode.latent", mask="cut.mask"),
        ],
        "masked",
    )
    ours = rendered(client, body["graph"], body["target"])
    assert max_diff(ours, rendered(client, graph, "decode")) == 0
