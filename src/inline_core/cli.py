"""The `inline-core` command: serve (the default) plus a few tools.

    inline-core [serve flags]          start the server (same flags as webui.sh and main.py)
    inline-core kit [--family F] ...   write a family's tiny random-weight models (tests, demo)
    inline-core download [--family F]  explicitly download a family's real weights into models/
    inline-core import-comfy FILE      convert a ComfyUI workflow into an Inline Core graph
    inline-core packs install|list|remove   manage node packs (each in its own environment)
    inline-core move-store --to URL    copy the SQLite run store into PostgreSQL (several servers)

Serve flags only set `INLINE_*` environment variables; `Config.from_env()` reads them, so the env,
the flags and the launchers can never disagree.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from inline_core.runtime.preview import PREVIEW_METHODS


def port_number(text: str) -> int:
    """--port: refused at once when it is not a TCP port (the OS would pick a random one)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port number 1-65535")
    return port


def at_least_one(text: str) -> int:
    """--max-batch, --batch-token-budget: 0 would mean nothing runs; refused, not dropped."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(
            f"must be at least 1, got {value} (1 turns batching off; leave it out for the "
            "device's default)"
        )
    return value


# The subcommands beside serving: what `inline-core --help` lists (each has its own --help).
TOOL_SUMMARIES = {
    "kit": "write a family's tiny random-weight models (tests, the demo)",
    "download": "download a family's real weights into the models folder",
    "import-comfy": "convert a ComfyUI workflow into an Inline Core graph",
    "packs": "install, list or remove node packs (each in its own environment)",
    "move-store": "copy the SQLite run store into PostgreSQL (several servers)",
}


def tools_help(prog: str) -> str:
    lines = [f"  {prog} {name:<14} {summary}" for name, summary in TOOL_SUMMARIES.items()]
    return "\n".join(
        ["subcommands (each with its own --help; none given: serve):", *lines]
    )


def build_serve_parser(prog: str = "inline-core") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        description="Run the Inline Core render server (/v1 HTTP + websocket).",
        epilog=tools_help(prog),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    net = p.add_argument_group("networking")
    net.add_argument("--host", help="bind address (default 127.0.0.1)")
    net.add_argument(
        "--listen", action="store_true", help="bind 0.0.0.0 (needs --token or --insecure)"
    )
    net.add_argument("--port", type=port_number, help="port 1-65535 (default 8848)")
    net.add_argument("--token", help="API token every request must carry (INLINE_API_TOKEN)")
    net.add_argument(
        "--insecure",
        action="store_true",
        help="allow listening beyond loopback without a token (warns on every start)",
    )
    net.add_argument(
        "--access-log",
        action="store_true",
        help="log one line per HTTP request (INLINE_ACCESS_LOG; off by default)",
    )
    net.add_argument(
        "--cors-origin",
        action="append",
        default=[],
        help="allow this browser origin (repeatable), e.g. the desktop app's",
    )
    paths = p.add_argument_group("paths")
    paths.add_argument("--models-dir", help="models root to scan (default ./models)")
    paths.add_argument("--data-dir", help="runs database and takes (default ./.inline)")
    paths.add_argument(
        "--front-end-root", help="serve a local frontend build (a dir with index.html) at /"
    )
    fleet = p.add_argument_group("several servers, one store")
    fleet.add_argument(
        "--database-url",
        help="share runs with other servers in PostgreSQL (postgresql://...; the postgres extra)",
    )
    fleet.add_argument("--server-id", help="this server's name among them (default: host + tag)")
    dev = p.add_argument_group("device and memory")
    dev.add_argument("--profile", choices=["gpu-max", "lowvram", "cpu"], help="device profile")
    dev.add_argument("--lowvram", action="store_true", help="shortcut for --profile lowvram")
    dev.add_argument("--cpu", action="store_true", help="shortcut for --profile cpu")
    dev.add_argument("--vram-budget", type=float, help="usable VRAM in GB")
    dev.add_argument(
        "--ram-budget", type=float, help="GB of RAM the models may take where they live in RAM"
    )
    dev.add_argument(
        "--dtype",
        choices=["auto", "float32", "bfloat16", "float16"],
        help="compute dtype of every model (default auto: bf16 where the device does it natively)",
    )
    dev.add_argument(
        "--allow-cpu-offload", action="store_true", help="opt into CPU offload (slow, saves VRAM)"
    )
    dev.add_argument(
        "--no-lora-fusing",
        action="store_true",
        help="apply LoRAs per row only, never on a fused private copy of the weights",
    )
    dev.add_argument(
        "--no-compile",
        action="store_true",
        help="run every transformer block eager, never compiled (torch.compile)",
    )
    dev.add_argument(
        "--compile",
        action="store_true",
        help="compile transformer blocks wherever the device can, not only where it was measured",
    )
    dev.add_argument(
        "--multi-gpu",
        "--parallel",
        dest="parallel",
        help="split one image across ranks, e.g. ulysses=2 (degrees multiply to the rank count)",
    )
    batch = p.add_argument_group("batching")
    batch.add_argument(
        "--max-batch", type=at_least_one, help="requests per forward, at least 1 (1: no batching)"
    )
    batch.add_argument(
        "--batch-token-budget", type=at_least_one, help="image tokens per forward, at least 1"
    )
    previews = p.add_argument_group("step previews")
    previews.add_argument(
        "--preview-method",
        choices=PREVIEW_METHODS,
        help="a run's previews unless it asks (default none; taesd needs models/vae_approx/)",
    )
    previews.add_argument(
        "--preview-size", type=int, help="the longest side of a preview image in pixels (512)"
    )
    return p


def apply_serve_args(args: argparse.Namespace, env: dict[str, str] | None = None) -> None:
    """Map parsed flags onto INLINE_* variables (the flags win over what the env had)."""
    target = os.environ if env is None else env
    values: dict[str, str | None] = {
        "INLINE_HOST": "0.0.0.0" if args.listen else None,
        "INLINE_PORT": None if args.port is None else str(args.port),
        "INLINE_API_TOKEN": args.token,
        "INLINE_ALLOW_INSECURE": "1" if args.insecure else None,
        "INLINE_ACCESS_LOG": "1" if args.access_log else None,
        "INLINE_CORS_ORIGINS": ",".join(args.cors_origin) if args.cors_origin else None,
        "INLINE_MODELS_DIR": args.models_dir,
        "INLINE_DATA_DIR": args.data_dir,
        "INLINE_FRONTEND_ROOT": args.front_end_root,
        "INLINE_DATABASE_URL": args.database_url,
        "INLINE_SERVER_ID": args.server_id,
        "INLINE_PROFILE": args.profile
        or ("lowvram" if args.lowvram else None)
        or ("cpu" if args.cpu else None),
        "INLINE_VRAM_BUDGET_GB": str(args.vram_budget) if args.vram_budget else None,
        "INLINE_RAM_BUDGET_GB": str(args.ram_budget) if args.ram_budget else None,
        "INLINE_DTYPE": args.dtype,
        "INLINE_ALLOW_CPU_OFFLOAD": "1" if args.allow_cpu_offload else None,
        "INLINE_NO_LORA_FUSING": "1" if args.no_lora_fusing else None,
        "INLINE_NO_COMPILE": "1" if args.no_compile else None,
        "INLINE_COMPILE": "1" if args.compile else None,
        "INLINE_PARALLEL": args.parallel,
        "INLINE_MAX_BATCH": None if args.max_batch is None else str(args.max_batch),
        "INLINE_BATCH_TOKEN_BUDGET": None
        if args.batch_token_budget is None
        else str(args.batch_token_budget),
        "INLINE_PREVIEW_METHOD": args.preview_method,
        "INLINE_PREVIEW_SIZE": None if args.preview_size is None else str(args.preview_size),
    }
    if args.host:  # an explicit --host wins over --listen
        values["INLINE_HOST"] = args.host
    for key, value in values.items():
        if value is not None:
            target[key] = value


def serve_main(argv: Sequence[str], prog: str = "inline-core") -> int:
    args = build_serve_parser(prog).parse_args(list(argv))
    apply_serve_args(args)
    # Imported after the env is set; the server stack never imports torch at start-up.
    from inline_core.config import Config
    from inline_core.errors import InlineError
    from inline_core.server.__main__ import serve

    try:
        config = Config.from_env()
    except InlineError as exc:
        print(f"inline-core: {exc.message}", file=sys.stderr)
        return 2
    return serve(config)


def _tool(module: str) -> Callable[[Sequence[str]], int]:
    def run(argv: Sequence[str]) -> int:
        import importlib

        main = importlib.import_module(module).main
        return int(main(list(argv)) or 0)

    return run


def _family_tool(tool: str) -> Callable[[Sequence[str]], int]:
    """`kit` and `download` are each family's own: `--family NAME` picks it (the built-in family
    when left out); the rest of the arguments are the family's."""

    def run(argv: Sequence[str]) -> int:
        from inline_core.contract.discovery import discover
        from inline_core.dotted import resolve_object

        entries = [e for e in discover() if e.family is not None]
        builtin = [e.family for e in entries if e.builtin and e.family is not None]
        chosen = next((f for f in builtin if f.tools_default), builtin[0] if builtin else None)
        default = None if chosen is None else chosen.name
        parser = argparse.ArgumentParser(prog=f"inline-core {tool}", add_help=False)
        parser.add_argument("--family", default=default)
        known, rest = parser.parse_known_args(list(argv))
        name = str(known.family)
        families = {e.family.name: e.family for e in entries if e.family is not None}
        family = families.get(name)
        main = None if family is None else getattr(family, tool, None)
        if family is None or main is None:
            having = sorted(n for n, f in families.items() if getattr(f, tool, None))
            print(
                f"inline-core {tool}: no installed family {name!r} has a {tool}; "
                f"families with one: {', '.join(having) or 'none'}",
                file=sys.stderr,
            )
            return 2
        entry = resolve_object(str(main))
        if not callable(entry):
            raise TypeError(f"{main} is not callable")
        code: object = entry(rest)
        return code if isinstance(code, int) else 0

    return run


TOOLS: dict[str, Callable[[Sequence[str]], int]] = {
    "kit": _family_tool("kit"),
    "download": _family_tool("download"),
    "import-comfy": _tool("inline_core.importer.cli"),
    "packs": _tool("inline_core.packs.cli"),
    "move-store": _tool("inline_core.server.stores.move"),
}


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in TOOLS:
        return TOOLS[args[0]](args[1:])
    if args and args[0] == "serve":
        args = args[1:]
    return serve_main(args)


if __name__ == "__main__":
    raise SystemExit(main())
