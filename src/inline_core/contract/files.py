"""How a family's files are found: a small rule table per family, one resolver for all (torch-free).

Each part of a stack is found, in order of precedence:
1. the family's override variable for it (e.g. `INLINE_<FAMILY>_VAE`), read from the config;
2. for the diffusion model, the node's `model` param (a name in `diffusion_models/`, or of an
   all-in-one checkpoint in `checkpoints/`: a file, or a diffusers pipeline folder);
3. the diffusers pipeline folder the model came from (its `vae/`, `text_encoder/`, `tokenizer/`,
   `scheduler/` subfolders);
4. a scan of the ComfyUI category folders, scoring each file or folder with the family's rule
   (safetensors header shapes, folder configs, names); with no diffusion model there, the first
   checkpoint whose diffusion model is the family's. A checkpoint's model takes its VAE and text
   encoder from the same file's views (`diffusion/files/checkpoint.py`) where it holds them.

The low-level loaders (`load/diffusion-model`, `load/vae`, `load/text-encoder`) name one file each;
`model_file`, `part_file` and `text_encoder_file` check it with the same rules and find its
companions (scheduler config, tokenizer). Nothing here downloads anything, and a file is read only
as far as its header, so a whole resolution stays within the submit-time budget.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from inline_core.contract.sources import Missing, Resolution, Sources
from inline_core.diffusion.files.checkpoint import (
    checkpoint_views,
    holds_prefix,
    key_outline,
    model_keys,
    view_of,
)
from inline_core.diffusion.files.shapes import Shapes, read_shapes
from inline_core.errors import ModelMissing, NotFound
from inline_core.models.catalog import Catalog, CatalogEntry
from inline_core.models.source import Source

REPO_ID = re.compile(r"^[\w.-]+/[\w.-]+$")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json")
TRANSFORMER, TOKENIZER, SCHEDULER = "transformer", "tokenizer", "scheduler"
# A part's category -> the kind of checkpoint view that holds it.
CHECKPOINT_PARTS = {"vae": "vae", "text_encoders": "text_encoder"}

# A part's score for a catalog entry, given the transformer already found (e.g. a text encoder
# must be as wide as the transformer's captions). Higher is better; None: not this part.
Score = Callable[[CatalogEntry, Source | None], int | None]


@dataclass(frozen=True)
class ModelRule:
    """How the family's diffusion model is told apart in `diffusion_models/`."""

    title: str  # "... is not a <title>", e.g. "Z-Image diffusion model"
    override: str | None  # the variable that names a model path outright
    # model_index.json `_class_name` of its diffusers pipelines (a prefix, or several)
    pipeline_prefix: str | tuple[str, ...]
    transformer_class: str  # config.json `_class_name` of a transformer folder
    recognize: Callable[[Shapes], bool]  # a single file, from its header's shapes
    name: re.Pattern[str] | None  # a file whose header is unreadable, claimed by its name
    hint: str  # where to put one; "{root}" is the models root
    subfolder: str = "transformer"  # its folder in a diffusers pipeline folder (a UNet's "unet")
    # What a checkpoint's model keys (its view, cut) that are not this family's look like, for
    # the refusal of one picked anyway; None: their outline.
    looks: Callable[[list[str]], str | None] | None = None


@dataclass(frozen=True)
class PartRule:
    part: str  # the name in `Sources`: "vae", "text_encoder", ...
    label: str  # how messages name it: "vae", "text encoder"
    title: str  # "... is not a <title>"
    category: str  # the catalog folder to scan
    subfolder: str  # its folder inside a diffusers pipeline folder
    override: str | None
    score: Score
    hint: str  # "{root}" is the models root
    # The names of the checkpoint views that hold it where a checkpoint holds several of its
    # kind (SDXL's two text encoders: `conditioner.embedders.0.` and `.1.`); empty: the first.
    checkpoint_views: tuple[str, ...] = ()
    # Its key prefix in a family's own all-in-one file (LTX-2's `audio_vae.`, `vocoder.`), where
    # no generic view names it: a checkpoint model's file holding keys under it holds the part.
    checkpoint_prefix: str | None = None


@dataclass(frozen=True)
class TokenizerRule:
    """The tokenizer of a text-encoder part: beside it, inside its folder, or the family's own."""

    part: str  # the text-encoder part it belongs to
    fallback: Callable[[], Path | None]  # e.g. a tokenizer a package ships
    hint: str
    # A tokenizer-only folder (no weights) in the encoder's category whose name matches, for a
    # single-file encoder no package ships a tokenizer for (e.g. `text_encoders/umt5-tokenizer/`):
    # the tokenizer's files in it, or in its `tokenizer/` subfolder (a diffusers repo's, as a
    # download target with a folder lands it).
    folder: re.Pattern[str] | None = None
    # Whether a single-file encoder carries its tokenizer (ComfyUI's Mistral): the file is then
    # the tokenizer's source, and the family's builder reads it from there.
    inside: Callable[[Path], bool] | None = None


@dataclass(frozen=True)
class StackRules:
    title: str  # the family's title, for messages
    family: str
    model: ModelRule
    parts: tuple[PartRule, ...]
    tokenizer: TokenizerRule | None = None


@dataclass(frozen=True)
class Found:
    """A stack as far as it was found: each part's files (None: missing; the scheduler None: the
    family's default), what is missing and where to put it, and the model's catalog name."""

    parts: dict[str, Source | None]
    missing: tuple[Missing, ...]
    name: str


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        data: object = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return cast(dict[str, Any], data) if isinstance(data, dict) else None


def has_tokenizer(folder: Path) -> bool:
    return any((folder / name).is_file() for name in TOKENIZER_FILES)


def cached_snapshot(repo_id: str) -> Path | None:
    """A Hugging Face repo already in the local cache (never downloads)."""
    if importlib.util.find_spec("huggingface_hub") is None:
        return None
    hub = cast(Any, importlib.import_module("huggingface_hub"))
    try:
        return Path(hub.snapshot_download(repo_id, local_files_only=True))
    except Exception:  # not cached, or an invalid id: treated as missing
        return None


# Resolutions remembered per family: a few models, each with a few picks, per catalog state.
RESOLUTIONS_KEPT = 32


class StackResolver:
    def __init__(self, rules: StackRules, catalog: Catalog, env: Mapping[str, str]) -> None:
        self.rules = rules
        self.catalog = catalog
        self.env = env
        self._lock = threading.Lock()
        self._resolved: OrderedDict[Hashable, Resolution] = OrderedDict()

    @property
    def root(self) -> Path:
        return self.catalog.root

    def override(self, name: str | None) -> Path | None:
        raw = self.env.get(name) if name else None
        return Path(raw).expanduser() if raw else None

    def hint(self, text: str) -> str:
        return text.format(root=self.root)

    # -- the node's whole stack --------------------------------------------------------------------

    def resolve(
        self, model: str | None = None, picks: Mapping[str, str] | None = None
    ) -> Resolution:
        """The node's stack, resolved again only when the catalog's files change (its
        fingerprint: every entry's name, size and mtime), so a warm render's submit reads no
        header and scores no file. An override names a path outside the catalog: never kept.
        Only a complete stack is kept: what fixes a missing part may lie outside the catalog (a
        tokenizer folder, an installed package), so an incomplete one is looked for again each
        time. A kept stack's tokenizer (found outside the catalog) must still be there."""
        if any(self.override(name) is not None for name in self._override_names()):
            return self._resolve(model, picks)
        key = (model or None, tuple(sorted((picks or {}).items())), self.catalog.fingerprint())
        with self._lock:
            known = self._resolved.get(key)
            if known is not None and _tokenizer_present(known):
                self._resolved.move_to_end(key)
                return known
        resolution = self._resolve(model, picks)
        if resolution.sources is None or resolution.missing:
            return resolution
        if self.catalog.fingerprint() != key[-1]:  # rescanned meanwhile: not the state keyed
            return resolution
        with self._lock:
            self._resolved[key] = resolution
            while len(self._resolved) > RESOLUTIONS_KEPT:
                self._resolved.popitem(last=False)
        return resolution

    def _override_names(self) -> tuple[str | None, ...]:
        return (self.rules.model.override, *(rule.override for rule in self.rules.parts))

    def _resolve(self, model: str | None, picks: Mapping[str, str] | None) -> Resolution:
        found = self.found(model, picks)
        required = {k: v for k, v in found.parts.items() if k != SCHEDULER}
        if any(source is None for source in required.values()):
            return Resolution(self.rules.title, None, found.missing)
        sources = Sources.of(self.rules.family, found.name, found.parts)
        return Resolution(self.rules.title, sources, found.missing)

    def found(self, model: str | None = None, picks: Mapping[str, str] | None = None) -> Found:
        """Each part of the stack as found (None: missing) and what is missing, part by part.
        `picks`: a part's file the node names (`picks_of`), taken as named or said missing."""
        missing: list[Missing] = []
        transformer, pipeline_root, name = self._diffusion(model or None, missing)
        parts: dict[str, Source | None] = {TRANSFORMER: transformer}
        for rule in self.rules.parts:
            picked = (picks or {}).get(rule.part)
            if picked:
                parts[rule.part] = self._picked(rule, picked, transformer, missing)
            else:
                parts[rule.part] = self._part(rule, pipeline_root, transformer, missing)
        tokenizer_rule = self.rules.tokenizer
        if tokenizer_rule is not None:
            encoder = parts.get(tokenizer_rule.part)
            tokenizer = None if encoder is None else self.tokenizer_for(encoder)
            if encoder is not None and tokenizer is None:
                missing.append(Missing("tokenizer", self.hint(tokenizer_rule.hint)))
            parts[TOKENIZER] = tokenizer
        parts[SCHEDULER] = None
        if pipeline_root is not None and (pipeline_root / SCHEDULER).is_dir():
            parts[SCHEDULER] = Source(pipeline_root, SCHEDULER)
        return Found(parts, tuple(missing), name)

    # -- diffusion model -----------------------------------------------------------------------

    def _diffusion(
        self, model: str | None, missing: list[Missing]
    ) -> tuple[Source | None, Path | None, str]:
        rule = self.rules.model
        override = self.override(rule.override)
        if override is not None:
            return self._diffusion_at(override, str(rule.override), missing)
        if model:
            try:
                path = self.catalog.path("diffusion_models", model)
            except NotFound:
                folder = self._checkpoint_folder(model)
                if folder is not None:
                    source, root, _ = self._diffusion_at(folder, f"checkpoints/{model}", missing)
                    return source, root, model
                checkpoint = self._checkpoint_model(model)
                if checkpoint is not None:
                    return checkpoint, None, model
                foreign = self._foreign_checkpoint(model)
                if foreign is not None:
                    missing.append(Missing("diffusion model", foreign))
                    return None, None, model
                where = self.root / "diffusion_models"
                missing.append(Missing("diffusion model", f"{model!r} is not in {where}"))
                return None, None, model
            entry = self.catalog.entry("diffusion_models", model)
            if not self.recognizes_model(entry):  # said at submit, as the low-level loader does
                missing.append(
                    Missing(
                        "diffusion model",
                        f"diffusion_models/{model} is not a {rule.title}; {self.hint(rule.hint)}",
                    )
                )
                return None, None, model
            source, root, _ = self._diffusion_at(path, f"diffusion_models/{model}", missing)
            return source, root, model
        entry = next(
            (e for e in self.catalog.entries("diffusion_models") if self.recognizes_model(e)),
            None,
        )
        if entry is None:
            for checkpoint in self.catalog.entries("checkpoints"):
                folder = self._checkpoint_folder(checkpoint.name)
                if folder is not None:
                    source, root, _ = self._diffusion_at(folder, checkpoint.name, missing)
                    return source, root, checkpoint.name
                source = self._checkpoint_model(checkpoint.name)
                if source is not None:
                    return source, None, checkpoint.name
            missing.append(Missing("diffusion model", self.hint(rule.hint)))
            return None, None, ""
        source, root, _ = self._diffusion_at(entry.path, entry.name, missing)
        return source, root, entry.name

    def _diffusion_at(
        self, path: Path, label: str, missing: list[Missing]
    ) -> tuple[Source | None, Path | None, str]:
        if path.is_file():
            return Source(path), None, label
        if path.is_dir():
            if (path / "model_index.json").is_file():
                return Source(path, self.rules.model.subfolder), path, label
            if (path / "config.json").is_file():
                return Source(path), None, label
            missing.append(
                Missing(
                    "diffusion model", f"{label} ({path}) has no model_index.json or config.json"
                )
            )
            return None, None, label
        if REPO_ID.match(str(path)):
            cached = cached_snapshot(str(path))
            if cached is not None:
                return Source(cached, self.rules.model.subfolder), cached, str(path)
            missing.append(
                Missing(
                    "diffusion model",
                    f"{label}={path} is not a local path and that Hugging Face repo is not in the "
                    "local cache; download it explicitly first",
                )
            )
            return None, None, str(path)
        missing.append(Missing("diffusion model", f"{label}={path} does not exist"))
        return None, None, label

    def _checkpoint_folder(self, name: str) -> Path | None:
        """A diffusers pipeline folder of this family's in `checkpoints/` (all its parts in one,
        as a checkpoint file has them)."""
        try:
            entry = self.catalog.entry("checkpoints", name)
        except NotFound:
            return None
        if not entry.is_folder or not (entry.path / "model_index.json").is_file():
            return None
        return entry.path if self.recognizes_model(entry) else None

    def _checkpoint_model(self, name: str) -> Source | None:
        """The diffusion model of the `checkpoints/` entry `name`, when it is this family's."""
        try:
            entry = self.catalog.entry("checkpoints", name)
        except NotFound:
            return None
        view = view_of(checkpoint_views(entry.path) or (), "diffusion_model")
        shapes = None if view is None else read_shapes(entry.path, view.prefix)
        if view is None or shapes is None or not self.rules.model.recognize(shapes):
            return None
        return Source(entry.path, view=view.prefix)

    def _foreign_checkpoint(self, name: str) -> str | None:
        """Why the `checkpoints/` file `name` is not this family's model: what its keys look
        like; None when it is not there or unreadable."""
        try:
            entry = self.catalog.entry("checkpoints", name)
        except NotFound:
            return None
        keys = None if entry.is_folder else model_keys(entry.path)
        if keys is None:
            return None
        rule = self.rules.model
        look = (rule.looks(keys) if rule.looks is not None else None) or key_outline(keys)
        said = f"checkpoints/{name} is not a {rule.title}: its keys look like {look}"
        return f"{said}; {self.hint(rule.hint)}"

    def recognizes_model(self, entry: CatalogEntry) -> bool:
        """Whether a `diffusion_models/` entry (or a `checkpoints/` one: its diffusion model's
        view, by its keys) is this family's model."""
        rule = self.rules.model
        if entry.category == "checkpoints" and not entry.is_folder:
            return self._checkpoint_model(entry.name) is not None
        if entry.is_folder:
            index = read_json(entry.path / "model_index.json")
            if index is not None:
                return str(index.get("_class_name", "")).startswith(rule.pipeline_prefix)
            config = read_json(entry.path / "config.json")
            return config is not None and config.get("_class_name") == rule.transformer_class
        shapes = read_shapes(entry.path)
        if shapes is None:  # unreadable: a matching name still claims it (the run names the file)
            return rule.name is not None and bool(rule.name.search(entry.name))
        return rule.recognize(shapes)

    # -- the other parts -------------------------------------------------------------------------

    def _part(
        self,
        rule: PartRule,
        pipeline_root: Path | None,
        transformer: Source | None,
        missing: list[Missing],
    ) -> Source | None:
        override = self.override(rule.override)
        if override is not None:
            found = _component_at(override, rule.subfolder)
            if found is None:
                missing.append(Missing(rule.label, f"{rule.override}={override} does not exist"))
            return found
        if pipeline_root is not None and (pipeline_root / rule.subfolder).is_dir():
            return Source(pipeline_root, rule.subfolder)
        if transformer is not None and transformer.view is not None and rule.checkpoint_prefix:
            if holds_prefix(transformer.path, rule.checkpoint_prefix):
                return Source(transformer.path, view=rule.checkpoint_prefix)
        elif transformer is not None and transformer.view is not None:
            kind = CHECKPOINT_PARTS.get(rule.category)
            views = checkpoint_views(transformer.path) or ()
            view = view_of(views, kind or "", rule.checkpoint_views)
            if view is not None:  # the checkpoint's own part: the loader checks its format
                return Source(transformer.path, view=view.prefix)
        entry = _best(self.catalog.entries(rule.category), lambda e: rule.score(e, transformer))
        if entry is None:
            missing.append(Missing(rule.label, self.hint(rule.hint)))
            return None
        return Source(entry.path)

    def _picked(
        self, rule: PartRule, name: str, transformer: Source | None, missing: list[Missing]
    ) -> Source | None:
        """The part a node names: that file, or missing saying why (never another one)."""
        try:
            entry = self.catalog.entry(rule.category, name)
        except NotFound:
            where = self.root / rule.category
            missing.append(Missing(rule.label, f"{name!r} is not in {where}"))
            return None
        if rule.score(entry, transformer) is None:
            missing.append(
                Missing(
                    rule.label,
                    f"{rule.category}/{name} is not a {rule.title} for this model; "
                    + self.hint(rule.hint),
                )
            )
            return None
        return Source(entry.path)

    def picks_of(self, params: Mapping[str, Any]) -> dict[str, str]:
        """The parts a node's params name (a param named as the part: `vae`, `text_encoder`)."""
        return {
            rule.part: str(params[rule.part])
            for rule in self.rules.parts
            if isinstance(params.get(rule.part), str) and params[rule.part]
        }

    def tokenizer_for(self, encoder: Source) -> Source | None:
        if encoder.subfolder is not None:
            sibling = encoder.path / TOKENIZER
            if sibling.is_dir() and has_tokenizer(sibling):
                return Source(encoder.path, TOKENIZER)
        elif encoder.path.is_dir() and has_tokenizer(encoder.path):
            return Source(encoder.path)
        rule = self.rules.tokenizer
        if rule is not None and rule.inside is not None and encoder.is_file:
            if rule.inside(encoder.path):
                return Source(encoder.path)
        if rule is not None and rule.folder is not None:
            found = self._tokenizer_folder(rule.folder, self.part_rule(rule.part).category)
            if found is not None:
                return found
        packaged = None if rule is None else rule.fallback()
        return Source(packaged) if packaged is not None else None

    def _tokenizer_folder(self, pattern: re.Pattern[str], category: str) -> Source | None:
        base = self.root / category
        try:
            children = sorted(base.iterdir())
        except OSError:
            return None
        for child in children:
            if not child.is_dir() or not pattern.search(child.name):
                continue
            if has_tokenizer(child):
                return Source(child)
            if has_tokenizer(child / TOKENIZER):  # a repo's `tokenizer/` folder, downloaded
                return Source(child, TOKENIZER)
        return None

    # -- one picked file per part (the low-level loaders) --------------------------------------

    def _entry(self, category: str, name: str) -> CatalogEntry:
        try:
            return self.catalog.entry(category, name)
        except NotFound as exc:
            raise ModelMissing(exc.message) from exc

    def model_file(self, entry: CatalogEntry) -> tuple[Source, Source | None] | None:
        """The transformer behind a `diffusion_models/` entry and the scheduler config beside it
        (a diffusers folder's; None: the family's own); None if it is not this family's."""
        if not self.recognizes_model(entry):
            return None
        path = entry.path
        if entry.is_folder and (path / "model_index.json").is_file():
            scheduler = Source(path, SCHEDULER) if (path / SCHEDULER).is_dir() else None
            return Source(path, self.rules.model.subfolder), scheduler
        return Source(path), None

    def part_rule(self, part: str) -> PartRule:
        return next(rule for rule in self.rules.parts if rule.part == part)

    def part_file(self, part: str, entry: CatalogEntry) -> Source | None:
        """The part behind a picked entry of its category; None if this family does not take it."""
        return None if self.part_rule(part).score(entry, None) is None else Source(entry.path)

    def models(self) -> list[CatalogEntry]:
        return [e for e in self.catalog.entries("diffusion_models") if self.recognizes_model(e)]

    def entry(self, category: str, name: str) -> CatalogEntry:
        return self._entry(category, name)


def _component_at(path: Path, subfolder: str) -> Source | None:
    """An override for one part: a file, a component folder, or a diffusers pipeline folder."""
    if path.is_file():
        return Source(path)
    if path.is_dir():
        if (path / "model_index.json").is_file() and (path / subfolder).is_dir():
            return Source(path, subfolder)
        return Source(path)
    return None


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


def _tokenizer_present(resolution: Resolution) -> bool:
    """Whether a kept stack's tokenizer is still on disk: it is the one part the catalog's
    fingerprint does not cover (a folder beside the files, or an installed package)."""
    sources = resolution.sources
    tokenizer = None if sources is None else sources.get(TOKENIZER)
    return tokenizer is None or tokenizer.path.exists()
