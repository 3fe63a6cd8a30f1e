"""Run the server: `python -m inline_core.server` (configured by `INLINE_*` variables).

Start-up refuses, in one line and exit status 2, before anything is opened: a bind beyond
loopback without a token, a setting whose extra is missing, a data folder another server holds
(`data_lock.py`), a port that cannot be had. Only then is the store opened and recovered.

SIGTERM / SIGINT stop it gracefully: no new connections, running runs stop at their next step and
are queued again for the next start, and the process exits within a few seconds.
"""

from __future__ import annotations

import logging
import sys

import uvicorn

from inline_core.config import Config, exposure_check
from inline_core.errors import InlineError, InvalidRequest
from inline_core.server.access import LoopbackHostGate
from inline_core.server.app import create_app
from inline_core.server.bootstrap import build_services
from inline_core.server.collector import settle_startup_heap
from inline_core.server.data_lock import acquire_data_lock
from inline_core.server.listen import bind_listener
from inline_core.server.memory import tune_malloc
from inline_core.server.openmp import choose_wait
from inline_core.server.startup_checks import check_extras, startup_warnings

log = logging.getLogger("inline_core.server")

# How long open connections (e.g. websockets) may take to close after a stop signal.
GRACEFUL_CLOSE_S = 2


def check_bind(config: Config) -> None:
    """Listening beyond loopback needs a token, unless the user explicitly accepts the risk."""
    refusal, warning = exposure_check(config)
    if refusal is not None:
        raise InvalidRequest(refusal)
    if warning is not None:
        log.warning(warning)


def serve(config: Config) -> int:
    """Serve until SIGTERM/SIGINT; returns the process exit status (0: clean stop, 2: the
    configuration cannot run, said in one line on stderr). After a graceful stop on a signal,
    uvicorn raises that signal again, so the process then ends with the signal's status."""
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    choose_wait()  # before anything loads torch (libgomp reads it once)
    try:
        check_bind(config)
        check_extras(config)
        lock = acquire_data_lock(config)  # before the store is opened, let alone recovered
    except InlineError as exc:
        print(f"inline-core: {exc.message}", file=sys.stderr)
        return 2
    try:
        listener = bind_listener(config.host, config.port)
    except InlineError as exc:
        if lock is not None:
            lock.release()
        print(f"inline-core: {exc.message}", file=sys.stderr)
        return 2
    for warning in startup_warnings(config):
        log.warning(warning)
    tune_malloc()  # before create_app starts the store's and workers' threads
    try:
        app = create_app(config, build_services(config, lock=lock))
    except InlineError as exc:  # a configuration the server cannot run, e.g. INLINE_PARALLEL
        listener.close()
        if lock is not None:
            lock.release()
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
            # Per-request lines cost throughput: off unless asked (--access-log); errors are
            # logged either way.
            access_log=config.access_log,
            # Events are small JSON frames: compressing them saves little, while each socket's
            # zlib state holds ~200 KB (tracemalloc, 16 watching clients).
            ws_per_message_deflate=False,
            timeout_graceful_shutdown=GRACEFUL_CLOSE_S,
            log_config=None,  # keep the logging set up above
        )
    )
    server.run(sockets=[listener])
    return 0 if server.started else 1


def main() -> None:
    try:
        config = Config.from_env()
    except InlineError as exc:
        print(f"inline-core: {exc.message}", file=sys.stderr)
        sys.exit(2)
    sys.exit(serve(config))


if __name__ == "__main__":
    main()
