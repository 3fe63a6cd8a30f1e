"""`python -m inline_core_sdk describe|serve`: what the server runs inside a pack's environment.

    describe --nodes JSON          print the SDK version and the nodes' declarations as JSON
    serve --fd N [--arena-fd M] --nodes JSON
                                   serve calls on the inherited socket N, images through the
                                   inherited arena M
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import cast

from inline_core_sdk.loading import PackLoadError, describe, load_nodes
from inline_core_sdk.worker import serve


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m inline_core_sdk")
    parser.add_argument("command", choices=["describe", "serve"])
    parser.add_argument("--nodes", required=True, help='{"name": "module:Class", ...}')
    parser.add_argument("--fd", type=int, help="the socket to serve on (serve)")
    parser.add_argument("--arena-fd", type=int, help="the arena for images (serve)")
    args = parser.parse_args(argv)
    nodes = cast(dict[str, str], json.loads(args.nodes))
    try:
        if args.command == "describe":
            print(json.dumps(describe(nodes)))
            return 0
        if args.fd is None:
            parser.error("serve needs --fd")
        serve(int(args.fd), load_nodes(nodes), args.arena_fd)
    except PackLoadError as exc:
        print(f"inline_core_sdk: {exc}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
