"""All configuration, read from `INLINE_*` environment variables (launchers map flags onto them).

`Config.from_env()` is the only place the environment is read; everything else takes a `Config`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from inline_core.errors import InvalidRequest
from inline_core.runtime.preview import NONE, PREVIEW_METHODS

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
ENV_PREFIX = "INLINE_"
T = TypeVar("T")
D = TypeVar("D")


def _parsed(
    env: Mapping[str, str], name: str, default: D, parse: Callable[[str], T], what: str
) -> T | D:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        return parse(raw)
    except ValueError as exc:
        raise InvalidRequest(f"{name} must be {what}, got {raw!r}") from exc


def _int(env: Mapping[str, str], name: str, default: int) -> int:
    return _parsed(env, name, default, int, "an integer")


def _float(env: Mapping[str, str], name: str, default: float | None) -> float | None:
    return _parsed(env, name, default, float, "a number")


def _positive(value: float | None) -> float | None:
    """None for an unset, zero or negative cap (0 means "no cap")."""
    return value if value is not None and value > 0 else None


def _flag(env: Mapping[str, str], name: str) -> bool:
    return env.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


def _at_least(env: Mapping[str, str], name: str, default: float, low: float) -> float:
    value = _float(env, name, default)
    if value is None or value < low:
        raise InvalidRequest(f"{name} must be a number of seconds of at least {low:g}")
    return value


def _database_url(env: Mapping[str, str]) -> str | None:
    url = env.get("INLINE_DATABASE_URL", "").strip()
    if not url:
        return None
    scheme = url.split("://", 1)[0] if "://" in url else ""
    if scheme not in ("postgresql", "postgres"):
        # Only the scheme is quoted: the rest may hold a password.
        given = f"a {scheme}:// URL" if scheme else "no URL scheme"
        raise InvalidRequest(
            f"INLINE_DATABASE_URL must be a postgresql:// URL, got {given} (leave it unset for "
            "the SQLite store in the data dir)"
        )
    return url


def _port(env: Mapping[str, str]) -> int:
    port = _int(env, "INLINE_PORT", 8848)
    if not 1 <= port <= 65535:
        raise InvalidRequest(f"INLINE_PORT (--port) must be a port number 1-65535, got {port}")
    return port


def _count(env: Mapping[str, str], name: str, flag: str, meaning: str) -> int | None:
    """An optional whole number of at least 1 (unset: the device's default)."""
    if not env.get(name):
        return None
    value = _int(env, name, 0)
    if value < 1:
        raise InvalidRequest(
            f"{name} ({flag}) must be at least 1, got {value}: it is {meaning}; leave it unset "
            "for the device's default"
        )
    return value


def _path(env: Mapping[str, str], name: str) -> Path | None:
    raw = env.get(name)
    return Path(raw).expanduser() if raw else None


def absolute(path: Path) -> Path:
    """`path` from the working directory, `..` folded; the file system is not read."""
    return Path(os.path.abspath(path))


_FOLDERS = ("models_dir", "data_dir", "frontend_root", "packs_dir_override", "pack_scratch_dir")


def _preview_method(env: Mapping[str, str]) -> str:
    method = env.get("INLINE_PREVIEW_METHOD") or NONE
    if method not in PREVIEW_METHODS:
        raise InvalidRequest(
            f"INLINE_PREVIEW_METHOD (--preview-method) is {method!r}; choose one of "
            f"{', '.join(PREVIEW_METHODS)}"
        )
    return method


def _preview_size(env: Mapping[str, str]) -> int:
    size = _int(env, "INLINE_PREVIEW_SIZE", 512)
    if not 8 <= size <= 4096:
        raise InvalidRequest(
            f"INLINE_PREVIEW_SIZE (--preview-size) is the longest side of a preview in pixels, "
            f"8-4096; got {size}"
        )
    return size


@dataclass(frozen=True)
class Config:
    models_dir: Path = Path("models")
    data_dir: Path = Path(".inline")
    host: str = "127.0.0.1"
    port: int = 8848
    frontend_root: Path | None = None
    # Device
    profile: str | None = None  # gpu-max | lowvram | cpu; None = auto-detect
    vram_budget_gb: float | None = None
    ram_budget_gb: float | None = None  # RAM the models may take where they live in RAM
    dtype: str | None = None  # float32 | bfloat16 | float16; None (auto) = per hardware
    allow_cpu_offload: bool = False
    no_lora_fusing: bool = False  # LoRAs per row only: never a fused private copy
    no_compile: bool = False  # every transformer block eager, whatever the device policy says
    compile: bool = False  # compiled blocks wherever the device can, measured to pay or not
    parallel: str | None = None  # e.g. "ulysses=2"
    # Access
    api_token: str | None = None
    access_log: bool = False  # one log line per HTTP request (INLINE_ACCESS_LOG, --access-log)
    allow_insecure: bool = False
    cors_origins: tuple[str, ...] = ()
    # Limits
    max_upload_mb: int = 256
    # Width x height of an uploaded or opened image (a decompression-bomb guard): 8192 x 8192.
    max_image_pixels: int = 8192 * 8192
    max_graph_nodes: int = 2000
    max_body_mb: int = 16
    max_queue: int = 1000
    max_retries: int = 2
    # Open `/v1/runs/{id}/events` sockets, in all and per run (each holds a file descriptor and a
    # small event buffer); beyond them the handshake is refused with 429 `busy`.
    max_websockets: int = 2000
    max_websockets_per_run: int = 64
    # Disk: an upload is refused (507) if it would leave less than this free on the data dir's
    # disk (room kept for takes and the database), or grow the assets folder beyond
    # `max_assets_gb` (None: no cap of its own, the free-space floor bounds it).
    min_free_disk_mb: int = 1024
    max_assets_gb: float | None = None
    # Runs executing at once (their GPU work is grouped by the batched sampler)
    run_workers: int = 16
    # Trusted in-process nodes: "module:function" callables taking the registry (INLINE_PLUGINS)
    plugins: tuple[str, ...] = ()
    # Node packs (each in its own environment and worker): where they live (INLINE_PACKS_DIR,
    # default <data_dir>/packs) and what builds their environments (INLINE_PACKS_INSTALLER).
    packs_dir_override: Path | None = None
    packs_installer: str = "auto"  # auto (uv where found, else pip) | uv | pip
    # Where pack workers' scratch folders go (INLINE_PACK_SCRATCH_DIR; None: /dev/shm where
    # writable, else the temp dir). The start-up sweep of orphaned ones looks only here.
    pack_scratch_dir: Path | None = None
    # Model downloads (`/v1/downloads`): how many run at once (the rest queue), and the hub they
    # come from (HF_ENDPOINT, as huggingface_hub names it: a mirror or a local hub; None: the Hub).
    max_downloads: int = 2
    hf_endpoint: str | None = None
    # Step previews: the method a run gets unless it asks for another (none | latent2rgb |
    # taesd), and the longest side of a preview image in pixels.
    preview_method: str = "none"
    preview_size: int = 512
    # Sampler
    max_batch: int | None = None
    batch_token_budget: int | None = None
    # Every INLINE_* variable as read: model families take their own settings from it (e.g. a
    # family's model overrides), so the environment is still read in this one place.
    env: Mapping[str, str] = field(default_factory=dict[str, str])
    # Several servers, one run store: PostgreSQL at this URL instead of runs.db in the data dir
    # (the data dir, on storage every server shares, then holds only takes and assets).
    database_url: str | None = None
    server_id: str | None = None  # this server's name among them; None: host name + random tag
    lease_timeout_s: float = 15.0  # a server that stops renewing loses its runs after this
    database_retry_s: float = 60.0  # how long to wait for an unreachable database (start, results)

    def __post_init__(self) -> None:
        # Folders are made absolute here, once: a relative one would name another place once a
        # subprocess runs in its own working directory (a pack's worker, its installer).
        for name in _FOLDERS:
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, absolute(value))

    @property
    def is_loopback(self) -> bool:
        return self.host in LOOPBACK_HOSTS

    @property
    def url(self) -> str:
        """Where a browser on this machine reaches the server (an unspecified bind address
        answers on loopback too)."""
        host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(self.host, self.host)
        return f"http://[{host}]:{self.port}/" if ":" in host else f"http://{host}:{self.port}/"

    @property
    def runs_db(self) -> Path:
        return self.data_dir / "runs.db"

    @property
    def takes_dir(self) -> Path:
        return self.data_dir / "takes"

    @property
    def assets_dir(self) -> Path:
        return self.data_dir / "assets"

    @property
    def packs_dir(self) -> Path:
        return self.packs_dir_override or self.data_dir / "packs"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Config:
        env = os.environ if env is None else env
        settings = {k: v for k, v in env.items() if k.startswith(ENV_PREFIX)}
        raw_origins = env.get("INLINE_CORS_ORIGINS", "").split(",")
        origins = tuple(o.strip() for o in raw_origins if o.strip())
        plugins = tuple(p.strip() for p in env.get("INLINE_PLUGINS", "").split(",") if p.strip())
        return cls(
            models_dir=_path(env, "INLINE_MODELS_DIR") or Path("models"),
            data_dir=_path(env, "INLINE_DATA_DIR") or Path(".inline"),
            host=env.get("INLINE_HOST") or "127.0.0.1",
            port=_port(env),
            frontend_root=_path(env, "INLINE_FRONTEND_ROOT"),
            profile=env.get("INLINE_PROFILE") or None,
            vram_budget_gb=_float(env, "INLINE_VRAM_BUDGET_GB", None),
            ram_budget_gb=_float(env, "INLINE_RAM_BUDGET_GB", None),
            dtype=env.get("INLINE_DTYPE") or None,
            allow_cpu_offload=_flag(env, "INLINE_ALLOW_CPU_OFFLOAD"),
            no_lora_fusing=_flag(env, "INLINE_NO_LORA_FUSING"),
            no_compile=_flag(env, "INLINE_NO_COMPILE"),
            compile=_flag(env, "INLINE_COMPILE"),
            parallel=env.get("INLINE_PARALLEL") or None,
            api_token=env.get("INLINE_API_TOKEN") or None,
            access_log=_flag(env, "INLINE_ACCESS_LOG"),
            allow_insecure=_flag(env, "INLINE_ALLOW_INSECURE"),
            cors_origins=origins,
            max_upload_mb=_int(env, "INLINE_MAX_UPLOAD_MB", 256),
            max_image_pixels=_int(env, "INLINE_MAX_IMAGE_PIXELS", 8192 * 8192),
            max_graph_nodes=_int(env, "INLINE_MAX_GRAPH_NODES", 2000),
            max_body_mb=_int(env, "INLINE_MAX_BODY_MB", 16),
            max_queue=_int(env, "INLINE_MAX_QUEUE", 1000),
            max_retries=_int(env, "INLINE_MAX_RETRIES", 2),
            max_websockets=max(1, _int(env, "INLINE_MAX_WEBSOCKETS", 2000)),
            max_websockets_per_run=max(1, _int(env, "INLINE_MAX_WEBSOCKETS_PER_RUN", 64)),
            min_free_disk_mb=max(0, _int(env, "INLINE_MIN_FREE_DISK_MB", 1024)),
            max_assets_gb=_positive(_float(env, "INLINE_MAX_ASSETS_GB", None)),
            run_workers=max(1, _int(env, "INLINE_RUN_WORKERS", 16)),
            max_downloads=max(1, _int(env, "INLINE_MAX_DOWNLOADS", 2)),
            hf_endpoint=env.get("HF_ENDPOINT") or None,
            plugins=plugins,
            packs_dir_override=_path(env, "INLINE_PACKS_DIR"),
            packs_installer=env.get("INLINE_PACKS_INSTALLER") or "auto",
            pack_scratch_dir=_path(env, "INLINE_PACK_SCRATCH_DIR"),
            max_batch=_count(
                env,
                "INLINE_MAX_BATCH",
                "--max-batch",
                "the requests one forward may take (1: no batching)",
            ),
            batch_token_budget=_count(
                env,
                "INLINE_BATCH_TOKEN_BUDGET",
                "--batch-token-budget",
                "the image tokens one forward may take",
            ),
            preview_method=_preview_method(env),
            preview_size=_preview_size(env),
            env=settings,
            database_url=_database_url(env),
            server_id=env.get("INLINE_SERVER_ID") or None,
            lease_timeout_s=_at_least(env, "INLINE_LEASE_TIMEOUT_S", 15.0, 1.0),
            database_retry_s=_at_least(env, "INLINE_DATABASE_RETRY_S", 60.0, 0.0),
        )


def exposure_check(config: Config) -> tuple[str | None, str | None]:
    """(refusal, warning) for the bind address: a non-loopback bind needs a token.

    Without one, starting is refused unless the user explicitly allowed it, and then every start
    warns.
    """
    if config.is_loopback or config.api_token:
        return None, None
    if config.allow_insecure:
        return None, (
            f"WARNING: listening on {config.host} with no API token: anyone who can reach this "
            "port can run jobs and read takes. Set --token / INLINE_API_TOKEN."
        )
    return (
        f"refusing to listen on {config.host} without an API token: pass --token (or set "
        "INLINE_API_TOKEN), or --insecure to accept the risk",
        None,
    )
