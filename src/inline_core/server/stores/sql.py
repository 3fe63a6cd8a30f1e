"""What the run store's SQL needs of a database: a `Dialect` (the few fragments that differ between
SQLite and PostgreSQL) and a `Db` (one connection, with transactions and notices).

Every query in `sql_store.py` is written once, with `?` placeholders and `{name}` fragments that
the dialect fills in. A backend (`sqlite.py`, `postgres.py`) supplies its connections and says
which of its errors mean "the database cannot be reached" (an outage the writer waits out) rather
than "this write is wrong".
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

Params = Sequence[object]
T = TypeVar("T")


class Row(Protocol):
    """A result row, read by column name (`sqlite3.Row` and psycopg's dict rows both are)."""

    def __getitem__(self, key: str, /) -> Any: ...


class Cursor(Protocol):
    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> Any: ...


@dataclass(frozen=True)
class Later(Generic[T]):
    """A write's result, read only once every write of its group has sent its statements.

    A write that returns one (instead of reading its cursor at once) lets a backend that
    pipelines (PostgreSQL) send the whole group in one round trip: a group of 32 submissions
    costs one wait for the database, not 32. `read` may still refuse with an `InlineError` if
    the write changed nothing (an insert that met a conflict)."""

    read: Callable[[], T]


_FRAGMENT = re.compile(r"\{([a-z_]+)\}")


@dataclass(frozen=True)
class Dialect:
    """How one database spells what the others spell differently."""

    name: str  # "sqlite" | "postgresql"
    # Fragments substituted for `{name}` in the store's SQL (types, clock, JSON lists, locks).
    fragments: Mapping[str, str]
    # The schema version: run first in a migration's transaction (locks out other servers'
    # migrations), the query that reads it (column `version`), what writes it ({version}).
    schema_lock: tuple[str, ...]
    read_version: str
    write_version: tuple[str, ...]
    placeholder: str = "?"
    _translated: dict[str, str] = field(default_factory=dict[str, str], compare=False, repr=False)

    def sql(self, text: str) -> str:
        """`text` in this dialect (translated once per distinct statement)."""
        out = self._translated.get(text)
        if out is None:
            out = _FRAGMENT.sub(lambda m: self.fragments[m.group(1)], text)
            if self.placeholder != "?":
                if "%" in out:  # psycopg would read it as a placeholder
                    raise ValueError(f"a literal % in store SQL: {out[:80]!r}")
                out = out.replace("?", self.placeholder)
            if len(self._translated) > 4096:  # statements built per call (VALUES lists) vary
                self._translated.clear()
            self._translated[text] = out
        return out


@dataclass(eq=False)
class Db(ABC):
    """One connection in use by the store. Notices (`notify`) queued during a transaction are
    sent when it commits and dropped when it rolls back."""

    # A DB-API connection (sqlite3 or psycopg): `execute(sql, params)` returning a cursor.
    conn: Any
    dialect: Dialect
    notices: set[tuple[str, str]] = field(default_factory=set[tuple[str, str]])

    def execute(self, sql: str, params: Params = ()) -> Cursor:
        cursor: Cursor = self.conn.execute(self.dialect.sql(sql), params)
        return cursor

    def one(self, sql: str, params: Params = ()) -> Row | None:
        row: Row | None = self.execute(sql, params).fetchone()
        return row

    def all(self, sql: str, params: Params = ()) -> list[Row]:
        rows: list[Row] = self.execute(sql, params).fetchall()
        return rows

    def pipelined(self) -> AbstractContextManager[object]:
        """Within it, statements go out without waiting for their answers where the backend
        can (a result read waits for what was sent before it)."""
        return nullcontext()

    def notify(self, channel: str, payload: str) -> None:
        """Tell whoever watches `channel` (this process and, on PostgreSQL, every other server)
        once the transaction commits."""
        self.notices.add((channel, payload))

    # Transactions: each backend spells them its own way.
    @abstractmethod
    def begin(self, durable: bool = True) -> None:
        """Open a write transaction. `durable=False`: its commit may skip the wait for stable
        storage where the backend can keep its order (a later durable commit covers it)."""

    @abstractmethod
    def commit(self) -> None:
        """Commit (a backend whose notices reach other servers sends them first)."""

    @abstractmethod
    def rollback(self) -> None: ...

    def commit_token(self) -> object | None:
        """Called before COMMIT: what to ask a new connection about this transaction if the
        COMMIT's answer is lost with the connection (None: a commit here never ends in doubt)."""
        return None

    def committed(self, token: object) -> bool:
        """Whether the transaction named by `token` committed (asked on a new connection)."""
        return False

    def close(self) -> None:
        self.conn.close()


class Backend(Protocol):
    """A database the store can run on (`sqlite.py`, `postgres.py`)."""

    @property
    def dialect(self) -> Dialect: ...

    @property
    def shared(self) -> bool:
        """Whether several servers share it (leases expire and are taken over) or one owns it."""
        ...

    @property
    def where(self) -> str:
        """Where it is, for logs and health (never with a password)."""
        ...

    def connect(self) -> Db:
        """A new connection for the writer."""
        ...

    def reading(self) -> AbstractContextManager[Db]:
        """A connection to read with (autocommit: each query sees the last commit)."""
        ...

    def is_outage(self, exc: BaseException) -> bool:
        """Whether `exc` means the database is out of reach (wait it out), not a bad write."""
        ...

    def listen(self, dispatch: Callable[[str, str], None]) -> None:
        """Deliver notices other servers' commits send (channel, payload) to `dispatch`; a
        store only this process uses has none."""
        ...

    def close(self) -> None: ...
