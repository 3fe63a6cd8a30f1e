"""The packs' client-visible failures (all `InlineError`s, so they reach clients as envelopes)."""

from __future__ import annotations

from inline_core.errors import InlineError, NotFound, RunFailed


class PackRefused(InlineError):
    """A pack this server will not install or load: a malformed manifest, an SDK range that
    excludes this server's SDK, a name taken by another node, a failed environment build."""

    code = "pack_refused"
    status = 422


class PackNotInstalled(NotFound):
    code = "pack_not_installed"


class PackNodeFailed(RunFailed):
    """A pack node failed in its worker: it raised, crashed, hung past its time limit or grew
    past its memory limit. The message names the pack; the run ends in error."""

    code = "pack_failed"
