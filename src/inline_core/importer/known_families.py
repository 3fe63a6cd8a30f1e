"""ComfyUI's model families as its workflows show them: so a workflow built for a family this
server does not run is refused naming it, rather than imported into another one.

Each entry is what gives a family away in a workflow: its model files' names, the `type` its
text encoder loads as (CLIPLoader, DualCLIPLoader, ...), and node classes only it uses. The
families a server does run are recognised from their own declarations first (`ModelFacts`);
this table only names the others. A family missing here is still refused, named by the type its
text encoder loads as, or by its model file.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class KnownFamily:
    title: str
    files: re.Pattern[str] | None = None  # model file names (UNETLoader, CheckpointLoaderSimple)
    text_encoder_types: tuple[str, ...] = ()  # CLIPLoader's `type`
    classes: re.Pattern[str] | None = None  # node classes only its workflows use
    # A key its diffusion model has (a checkpoint's `model.diffusion_model.` view, cut): what
    # tells a file of it whatever its name.
    keys: re.Pattern[str] | None = None
    keys_look: str = ""  # how messages say what those keys are


def _files(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


# The most specific first: "flux-2" before "flux", "wan2.2" before "wan".
KNOWN_FAMILIES: tuple[KnownFamily, ...] = (
    KnownFamily(
        "FLUX.2",
        _files(r"flux[-_.]?2"),
        ("flux2",),
        re.compile(r"Flux2"),
        re.compile(r"^double_stream_modulation"),
        "FLUX.2's transformer (double_stream_modulation)",
    ),
    KnownFamily("FLUX 3", _files(r"flux[-_.]?3"), ("flux3",), re.compile(r"Flux3")),
    KnownFamily(
        "FLUX.1",
        _files(r"flux[-_.]?1|flux[-_]?(dev|schnell|kontext|krea)|(^|[/_-])flux[-_]"),
        ("flux",),
        # Not ModelSamplingFlux: it sets any flow model's `mu` (Z-Image, FLUX.2, Krea 2 take it).
        re.compile(r"^(FluxGuidance|FluxKontext|CLIPTextEncodeFlux)"),
        re.compile(r"^double_blocks\.\d+\.img_attn\."),
        "FLUX.1's transformer (double_blocks with img_attn)",
    ),
    KnownFamily("Chroma", _files(r"chroma"), ("chroma",)),
    KnownFamily("ERNIE-Image", _files(r"ernie[-_]?image"), ()),  # its text encoder loads as "flux2"
    KnownFamily("HiDream", _files(r"hidream"), ("hidream",), re.compile(r"^QuadrupleCLIPLoader$")),
    KnownFamily("Qwen-Image", _files(r"qwen[-_]?image"), ("qwen_image",), re.compile(r"QwenImage")),
    KnownFamily(  # before Wan: Kijai's WanVideoWrapper runs its diffusion forcing
        "SkyReels-V2",
        _files(r"skyreels"),
        (),
        re.compile(r"^WanVideoDiffusionForcingSampler$"),
    ),
    KnownFamily(
        "Wan",
        _files(r"(^|[/_-])wan[-_.]?2|wan2[._]?[12]"),
        ("wan",),
        re.compile(r"^Wan[A-Z0-9]|WanVideo|^WanImageToVideo"),
    ),
    KnownFamily(
        "HunyuanVideo",
        _files(r"hunyuan[-_]?video"),
        ("hunyuan_video", "hunyuan_video_15"),
        re.compile(r"HunyuanVideo|EmptyHunyuanLatentVideo"),
    ),
    KnownFamily("Hunyuan3D", _files(r"hunyuan[-_]?3d"), (), re.compile(r"Hunyuan3D")),
    KnownFamily("HunyuanImage", _files(r"hunyuan[-_]?image"), ("hunyuan_image",)),
    KnownFamily("LTX-Video", _files(r"ltx[-_]?(v|video|2)"), ("ltxv",), re.compile(r"^LTXV")),
    KnownFamily(
        "Stable Diffusion 3",
        _files(r"(^|[/_-])sd[-_]?3|stable[-_]?diffusion[-_]?3"),
        ("sd3",),
        re.compile(r"^TripleCLIPLoader$"),
        re.compile(r"^joint_blocks\."),
        "SD3's MMDiT (joint_blocks)",
    ),
    KnownFamily(
        "SDXL",
        _files(r"sd[-_]?xl|(^|[/_-])xl[-_]|juggernaut|pony|illustrious|realvis"),
        ("sdxl",),
        re.compile(r"SDXL"),
        re.compile(r"^label_emb\."),
        "SDXL's UNet (input_blocks with label_emb, its size embedding)",
    ),
    KnownFamily(  # after SDXL: the same UNet naming, without SDXL's label_emb
        "Stable Diffusion 1.5",
        _files(r"(^|[/_-])(sd[-_]?1[-_.]?5|v1[-_]5|sd15)|dreamshaper|realistic[-_]?vision"),
        keys=re.compile(r"^input_blocks\.\d+\.1\.transformer_blocks\."),
        keys_look=(
            "a Stable Diffusion 1.x/2.x UNet (input_blocks with attention, no label_emb: not "
            "SDXL's size embedding)"
        ),
    ),
    KnownFamily("Stable Cascade", _files(r"stable[-_]?cascade"), ("stable_cascade",)),
    KnownFamily("Stable Audio", _files(r"stable[-_]?audio"), ("stable_audio",)),
    KnownFamily("ACE-Step", _files(r"ace[-_]?step|acestep"), ("ace",)),
    KnownFamily("Cosmos", _files(r"cosmos"), ("cosmos",)),
    KnownFamily("Lumina Image 2", _files(r"lumina|netayume"), ()),
    KnownFamily("OmniGen2", _files(r"omnigen"), ("omnigen2",)),
    KnownFamily("Kandinsky 5", _files(r"kandinsky"), ("kandinsky5", "kandinsky5_image")),
    KnownFamily("Mochi", _files(r"mochi"), ("mochi",)),
    KnownFamily("AuraFlow", _files(r"aura[-_]?flow"), ()),
    KnownFamily("PixArt", _files(r"pixart"), ("pixart",)),
    KnownFamily("Anima", _files(r"(^|[/_-])anima[-_]"), ()),
    KnownFamily("Lotus (depth and normals)", _files(r"(^|[/_-])lotus[-_]"), ()),
    KnownFamily("SeedVR2 (upscaling)", _files(r"seedvr"), ()),
    KnownFamily("SAM 3 (segmentation)", _files(r"(^|[/_-])sam[-_.]?3"), ()),
    KnownFamily("SDPose (pose)", _files(r"sdpose"), ()),
    KnownFamily("TripoSplat (3D)", _files(r"triposplat"), ()),
    KnownFamily("Pixal3D (3D)", _files(r"pixal3d"), ()),
    KnownFamily("TRELLIS.2 (3D)", _files(r"trellis"), ()),
    KnownFamily("YuE (music)", _files(r"(^|[/_-])yue[-_.]?\d"), ()),
)


def known_by_file(file_name: str) -> KnownFamily | None:
    return next((f for f in KNOWN_FAMILIES if f.files and f.files.search(file_name)), None)


def known_by_keys(keys: Iterable[str]) -> KnownFamily | None:
    """The family whose diffusion model has one of `keys` (a checkpoint's model view, cut)."""
    listed = list(keys)
    return next(
        (f for f in KNOWN_FAMILIES if f.keys and any(f.keys.search(k) for k in listed)), None
    )


def known_by_text_encoder(kind: str) -> KnownFamily | None:
    return next((f for f in KNOWN_FAMILIES if kind in f.text_encoder_types), None)


def known_by_class(class_type: str) -> KnownFamily | None:
    return next((f for f in KNOWN_FAMILIES if f.classes and f.classes.search(class_type)), None)


def most_specific_first(titles: Iterable[str]) -> list[str]:
    """`titles` in the table's order (the most specific first); titles it lacks last."""
    order = {f.title: i for i, f in enumerate(KNOWN_FAMILIES)}
    return sorted(titles, key=lambda title: order.get(title, len(order)))
