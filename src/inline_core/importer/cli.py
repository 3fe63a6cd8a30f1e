"""`inline-core import-comfy WORKFLOW.json [-o graph.json] [--models-dir DIR] [--asset NAME=ID]
[--model WORKFLOW_FILE=CATALOG_FILE]`

Prints (or writes) `{graph, target, skipped, warnings}`; warnings and skipped nodes are echoed to
stderr so a person running it sees what changed. Exit status 0 on success, 2 when the workflow
cannot be read or imported.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from inline_core.config import Config
from inline_core.errors import InlineError
from inline_core.importer.comfy import import_comfy
from inline_core.models.catalog import Catalog


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="inline-core import-comfy",
        description="Convert a ComfyUI workflow (API or UI format) into an Inline Core graph.",
    )
    p.add_argument("workflow", type=Path, help="the ComfyUI workflow JSON file")
    p.add_argument("-o", "--output", type=Path, help="write the result here instead of stdout")
    p.add_argument(
        "--models-dir",
        type=Path,
        help="models root to match model file names against (default: INLINE_MODELS_DIR or "
        "./models)",
    )
    p.add_argument(
        "--asset",
        action="append",
        default=[],
        metavar="NAME=ID",
        help="map a LoadImage file name to an uploaded asset id (repeatable)",
    )
    p.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="WORKFLOW_FILE=CATALOG_FILE",
        help="use the catalog's CATALOG_FILE where the workflow loads WORKFLOW_FILE (repeatable; "
        "the answer's unmatchedModels lists the candidates)",
    )
    return p


def _pairs(flag: str, shape: str, pairs: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name or not value:
            raise ValueError(f"{flag} takes {shape}, got {pair!r}")
        out[name] = value
    return out


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    try:
        assets = _pairs("--asset", "NAME=ID", list(args.asset))
        models = _pairs("--model", "WORKFLOW_FILE=CATALOG_FILE", list(args.model))
        text = Path(args.workflow).read_text(encoding="utf-8")
        workflow: object = json.loads(text)
        config = Config.from_env()
        catalog = Catalog(Path(args.models_dir or config.models_dir))
        # What the installed families know of the model files (their flow shifts), as the
        # server's import route asks them; torch-free.
        from inline_core.contract.registry import Families

        facts = Families.discovered(catalog, config.env)
        result = import_comfy(workflow, catalog, assets=assets, facts=facts, models=models)
    except (OSError, ValueError) as exc:  # json.JSONDecodeError is a ValueError
        print(f"inline-core import-comfy: {exc}", file=sys.stderr)
        return 2
    except InlineError as exc:
        print(f"inline-core import-comfy: {exc.message}", file=sys.stderr)
        return 2
    for item in result.skipped:
        print(f"skipped {item.class_type} {item.node_id}: {item.reason}", file=sys.stderr)
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    for unmatched in result.unmatched:
        shown = ", ".join(unmatched["candidates"]) or "none"
        print(
            f"{unmatched['comfyNode']}: {unmatched['file']!r} is not in {unmatched['category']}/; "
            f"candidates: {shown} (--model {unmatched['file']}=CANDIDATE)",
            file=sys.stderr,
        )
    body = json.dumps(result.to_json(), indent=2, ensure_ascii=False) + "\n"
    if args.output is not None:
        Path(args.output).write_text(body, encoding="utf-8")
    else:
        sys.stdout.write(body)
    return 0
