"""Run the server: `python -m inline_core.server` (configured by `INLINE_*` variables).

SIGTERM / SIGINT stop it gracefully: no new connections, running runs stop at their next step and
are queued again for the next start, and the process exits within a few seconds.
"""

from __future__ import annotations

import logging
import sys

import uvicorn

from inline_core.config import Config
from inline_core.errors import InlineError
from inline_core.server.access import LoopbackHostGate
from inline_core.server.app import create_app
from inline_core.server.collector import settle_startup_heap
from inline_core.server.memory import tune_malloc

log = logging.getLogger("inline_core.server")

# How long open connections (e.g. websockets) may take to close after a stop signal.
GRACEFUL_CLOSE_S = 2


def check_bind(config: Config) -> None:
    """Listening beyond loopback needs a token, unless the user explicitly accepts the risk."""
    if config.is_loopback or config.api_token:
        return
    if not config.allow_insecure:
        raise SystemExit(
            f"refusing to listen on {config.host} without an API token: set INLINE_API_TOKEN "
            "(or --token), or pass the explicit insecure flag (INLINE_ALLOW_INSECURE=1)"
        )
    log.warning(
        "listening on %s WITHOUT an API token: anyone who can reach this port can run graphs "
        "and read every take",
        config.host,
    )


def serve(config: Config) -> int:
    """Serve until SIGTERM/SIGINT; returns the process exit status (0: clean stop, 2: the
    configuration cannot run, said in one line on stderr). After a graceful stop on a signal,
    uvicorn raises that signal again, so the process then ends with the signal's status."""
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    check_bind(config)
    tune_malloc()  # before create_app starts the store's and workers' threads
    try:
        app = create_app(config)
    except InlineError as exc:  # a configuration the server cannot run, e.g. INLINE_PARALLEL
        print(f"inline-core: {exc.message}", file=sys.stderr)
        return 2
    if config.is_loopback and not config.api_token:
        # Loopback without a token: refuse Host names a DNS-rebinding page would send.
        app.add_middleware(LoopbackHostGate, extra_names=(config.host,))
    settle_startup_heap()
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host=config.host,
            port=config.port,
            lifespan="on",
            access_log=False,  # per-request lines cost throughput; errors are still logged
            # Events are small JSON frames: compressing them saves little, while each socket's
            # zlib state holds ~200 KB (tracemalloc, 16 watching clients).
            ws_per_message_deflate=False,
            timeout_graceful_shutdown=GRACEFUL_CLOSE_S,
            log_config=None,  # keep the logging set up above
        )
    )
    server.run()
    return 0 if server.started else 1


def main() -> None:
    sys.exit(serve(Config.from_env()))


if __name__ == "__main__":
    main()
