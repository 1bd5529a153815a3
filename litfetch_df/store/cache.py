"""The persistent response cache: one SQLite file shared by every session that names it.

A :class:`ResponseCache` stores the deterministic responses a :class:`~litfetch_df.Session`
receives (see :func:`litfetch_df.session.is_deterministic`) under the session's request
key, a SHA-256 digest of the whole request, so that a re-run, a resumed run or an offline
replay costs no upstream request. Design notes: docs/adr/0003-persistent-cache.md.

(About 600 lines, over the project's 550: the cache's file handling (private creation,
foreign files refused, one connection per thread, WAL) and its entries' encoding are one
SQLite file's rules; split, each half would need the other's schema.)
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import sqlite3
import threading
import time
import weakref
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Final
from urllib.parse import quote, quote_plus

from ..wire.http import get_logger, is_secret_header, redact_text, redact_url
from .answers import CachedResponse, ResponseStore

__all__ = [
    "DEFAULT_TTL",
    "CacheInfo",
    "ResponseCache",
    "open_cache",
]

log = get_logger("litfetch_df.store.cache")

#: Seconds an entry stays servable when no TTL is given: 30 days.
DEFAULT_TTL: float = 30 * 24 * 3600.0

#: The file name used when the cache is given as a directory.
FILE_NAME = "responses.sqlite3"

# A path that does not exist yet is taken for a file when it ends with one of these.
_FILE_SUFFIXES = frozenset({".sqlite", ".sqlite3", ".db"})

# How long a connection waits for another writer (another task's thread, another process)
# before SQLite gives up with "database is locked". Writes are single short statements,
# so this is only reached when something is badly stuck.
_BUSY_TIMEOUT_MS = 30_000

# Content below this size is stored as is: compressing it saves nothing worth the CPU.
_COMPRESS_MIN = 1024
# The probe that decides whether compressing is worth it (already-deflated PDFs, images).
_PROBE = 64 * 1024
_REDACTED = b"REDACTED"
# A secret shorter than this cannot be told from ordinary text, so it is never replaced in
# content; an entry that contains one is not stored at all.
_MIN_SCRUB = 6

_HEX_KEY = re.compile(r"[0-9a-f]{64}")
# Headers that describe the transfer rather than the content, or carry state of the
# client; the session drops them already, and so does the cache.
_DROPPED_HEADERS = frozenset(
    {"content-encoding", "content-length", "transfer-encoding", "set-cookie"}
)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS litfetch_responses (
    key        TEXT PRIMARY KEY,
    status     INTEGER NOT NULL,
    headers    TEXT NOT NULL,
    content    BLOB NOT NULL,
    codec      TEXT NOT NULL,
    size       INTEGER NOT NULL,
    url        TEXT NOT NULL,
    stored_at  REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS litfetch_responses_stored_at
    ON litfetch_responses (stored_at);
"""


@dataclass(frozen=True, slots=True)
class CacheInfo:
    """A summary of a cache file, as returned by :meth:`ResponseCache.info`.

    ``bytes`` is the size on disk (the database plus its write-ahead log);
    ``expired`` counts entries older than the cache's TTL, which are no longer
    served and which :meth:`ResponseCache.clear` with ``expired_only=True`` removes.
    ``oldest`` and ``newest`` are the UTC times the first and last entries were
    stored, or ``None`` when the cache is empty.
    """

    path: Path
    entries: int
    bytes: int
    expired: int
    oldest: datetime | None
    newest: datetime | None
    ttl: float


class _Connections:
    """The open connections of one cache, one per (process, thread).

    Kept apart from :class:`ResponseCache` so that a finaliser can close them
    without keeping the cache itself alive.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.open: list[sqlite3.Connection] = []
        self.generation = 0
        self.pid = os.getpid()

    def close_all(self) -> None:
        with self.lock:
            conns, self.open = self.open, []
            self.generation += 1
        for conn in conns:
            with contextlib.suppress(sqlite3.Error):
                conn.close()


class ResponseCache:
    """A persistent, process- and thread-safe store of HTTP responses in one SQLite file.

    ``path`` is a directory (the file ``responses.sqlite3`` is used inside it) or a
    file; a path that does not exist yet is a file when it ends in ``.sqlite``,
    ``.sqlite3`` or ``.db`` and a directory otherwise. Missing parents are created.

    ``ttl`` is how many seconds an entry is served after it was stored: ``None``
    means :data:`DEFAULT_TTL` (30 days) and ``math.inf`` means entries never
    expire. It is judged when reading, so a file recorded under one TTL can be
    replayed under a longer one. ``clock`` returns the current time in seconds
    since the epoch (tests inject one).

    Each entry is written in a single transaction, so two processes may share the
    file and a process killed at any moment leaves only whole entries. Every
    thread gets its own connection. Use the cache as a context manager, or call
    :meth:`close`; a closed cache reopens its file on the next use.

    ``read_only=True`` opens an existing cache file for inspection
    (:meth:`info`, :meth:`load`) without changing it: no directory, file or
    schema is created and the journal mode is left as it is. :meth:`save` and
    :meth:`clear` then fail with :class:`sqlite3.OperationalError`.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        ttl: float | None = None,
        clock: Callable[[], float] = time.time,
        read_only: bool = False,
    ) -> None:
        self._ttl = _check_ttl(ttl)
        self._clock = clock
        self._read_only = read_only
        given = Path(os.fspath(path)).expanduser()
        if read_only:
            self._path = given / FILE_NAME if given.is_dir() else given
        else:
            self._path = _resolve_path(given)
            self._path.parent.mkdir(parents=True, exist_ok=True, mode=_DIR_MODE)
            _create_private(self._path)
        self._local = threading.local()
        self._conns = _Connections()
        # Connections are closed when the cache is garbage collected, from whichever thread.
        self._finalizer = weakref.finalize(self, self._conns.close_all)
        # Open the file now (creating it, its schema and WAL mode unless read-only), so
        # that a bad path fails here.
        try:
            self._connection()
        except sqlite3.DatabaseError as exc:
            self.close()
            raise ValueError(f"{self._path} is not a usable response cache: {exc}") from None

    # -- properties --------------------------------------------------------------------------

    @property
    def path(self) -> Path:
        """The SQLite file."""
        return self._path

    @property
    def ttl(self) -> float:
        """Seconds an entry is served after it was stored (``math.inf``: forever)."""
        return self._ttl

    def __repr__(self) -> str:
        return f"<litfetch_df.ResponseCache path={str(self._path)!r} ttl={_show_ttl(self._ttl)}>"

    # -- the ResponseStore protocol ----------------------------------------------------------

    def load(self, key: str) -> CachedResponse | None:
        """Return the live entry stored under ``key``, or ``None`` (absent or expired).

        A row that cannot be read back (a broken file, an unknown encoding) is a
        miss too: the cache never fails the request it was meant to speed up.
        """
        try:
            # fetchall: the statement runs to its end, so no read snapshot stays open.
            rows = (
                self._connection()
                .execute(
                    "SELECT status, headers, content, codec, url, stored_at"
                    " FROM litfetch_responses WHERE key = ?",
                    (_row_key(key),),
                )
                .fetchall()
            )
        except sqlite3.Error as exc:
            log.warning("could not read the response cache %s: %s", self._path, exc)
            return None
        if not rows:
            return None
        status, headers, content, codec, url, stored_at = rows[0]
        if not self._is_live(float(stored_at)):
            return None
        try:
            return CachedResponse(
                status_code=int(status),
                headers=tuple((str(k), str(v)) for k, v in json.loads(headers)),
                content=_decode(bytes(content), str(codec)),
                url=str(url),
            )
        except (ValueError, TypeError, zlib.error) as exc:
            log.warning("unreadable entry in the response cache: %s", type(exc).__name__)
            return None

    def save(self, key: str, entry: CachedResponse, *, secrets: Sequence[str] = ()) -> None:
        """Store ``entry`` under ``key``, replacing any earlier entry, in one transaction.

        Every occurrence of a string in ``secrets`` (the credentials the request
        carried) is replaced by ``REDACTED`` in the content, the header values and
        the URL, in its plain and URL-encoded forms; credential headers are dropped.
        An entry that contains a secret too short to be replaced safely is not stored.
        """
        scrub = _Scrubber(secrets)
        content = scrub.bytes(entry.content)
        headers = [
            (name, scrub.text(redact_text(value)))
            for name, value in entry.headers
            if not is_secret_header(name) and name.lower() not in _DROPPED_HEADERS
        ]
        url = scrub.text(redact_url(entry.url))
        if scrub.unsafe:
            log.debug("not caching a response that echoes a short credential")
            return
        codec, stored = _encode(content)
        self._connection().execute(
            "INSERT OR REPLACE INTO litfetch_responses"
            " (key, status, headers, content, codec, size, url, stored_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                _row_key(key),
                int(entry.status_code),
                json.dumps(headers, separators=(",", ":")),
                stored,
                codec,
                len(content),
                url,
                self._clock(),
            ),
        )

    # -- inspection --------------------------------------------------------------------------

    def info(self) -> CacheInfo:
        """Return a :class:`CacheInfo`: entry counts, stored-time range and size on disk."""
        conn = self._connection()
        entries, oldest, newest = conn.execute(
            "SELECT COUNT(*), MIN(stored_at), MAX(stored_at) FROM litfetch_responses"
        ).fetchall()[0]
        expired = 0
        if math.isfinite(self._ttl):
            (expired,) = conn.execute(
                "SELECT COUNT(*) FROM litfetch_responses WHERE stored_at <= ?",
                (self._clock() - self._ttl,),
            ).fetchall()[0]
        return CacheInfo(
            path=self._path,
            entries=int(entries),
            bytes=sum(_size(Path(f"{self._path}{suffix}")) for suffix in ("", "-wal")),
            expired=int(expired),
            oldest=_utc(oldest),
            newest=_utc(newest),
            ttl=self._ttl,
        )

    def clear(self, *, expired_only: bool = False) -> int:
        """Delete every entry (or, with ``expired_only``, the expired ones); return how many.

        The freed pages are returned to the file system (for files this module created,
        which use incremental auto-vacuum).
        """
        conn = self._connection()
        if expired_only:
            if not math.isfinite(self._ttl):
                return 0
            cursor = conn.execute(
                "DELETE FROM litfetch_responses WHERE stored_at <= ?",
                (self._clock() - self._ttl,),
            )
        else:
            cursor = conn.execute("DELETE FROM litfetch_responses")
        removed = int(cursor.rowcount)
        if removed:
            # Shrinks the file without VACUUM, which would need every other reader gone.
            with contextlib.suppress(sqlite3.Error):
                conn.execute("PRAGMA incremental_vacuum").fetchall()
        return removed

    # -- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        """Close every connection this cache opened (in any thread); it reopens on next use.

        Call it when no thread is using the cache any more.
        """
        self._conns.close_all()

    def __enter__(self) -> ResponseCache:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- internals ---------------------------------------------------------------------------

    def _is_live(self, stored_at: float) -> bool:
        return self._clock() - stored_at < self._ttl

    def _connection(self) -> sqlite3.Connection:
        local = self._local
        conns = self._conns
        pid = os.getpid()
        conn: sqlite3.Connection | None = getattr(local, "conn", None)
        if conn is not None and local.pid == pid and local.generation == conns.generation:
            return conn
        with conns.lock:
            if conns.pid != pid:
                # After fork() the parent's connections are abandoned, neither used nor
                # closed: SQLite forbids carrying a connection across a fork.
                conns.open, conns.pid = [], pid
                conns.generation += 1
        conn = _connect(self._path, read_only=self._read_only)
        with conns.lock:
            conns.open.append(conn)
            local.generation = conns.generation
        local.conn, local.pid = conn, pid
        return conn


def open_cache(target: Any, *, ttl: float | None = None) -> ResponseStore | None:
    """Return the response store named by ``target``: ``None`` for ``None`` or ``False``,
    ``target`` itself when it already is a store (has ``load`` and ``save``), else a
    :class:`ResponseCache` on the path ``target`` with the given ``ttl``.
    """
    if target is None or target is False:
        return None
    if hasattr(target, "load") and hasattr(target, "save"):
        return target  # type: ignore[no-any-return]
    if isinstance(target, str | os.PathLike):
        return ResponseCache(target, ttl=ttl)
    raise TypeError(f"cache must be a path or a response store, not {type(target).__name__}")


# -- helpers -----------------------------------------------------------------------------------


def _check_ttl(ttl: float | None) -> float:
    if ttl is None:
        return DEFAULT_TTL
    value = float(ttl)
    # 0 is refused rather than guessed at: "expire at once" and "never expire" are both
    # plausible readings, and refresh=True / math.inf say each of them unambiguously.
    if math.isnan(value) or value <= 0:
        raise ValueError(
            "cache ttl must be a positive number of seconds (math.inf: never expire;"
            " use refresh=True to ignore stored entries)"
        )
    return value


def _show_ttl(ttl: float) -> str:
    if math.isinf(ttl):
        return "inf"
    if ttl >= 86400 and ttl % 86400 == 0:
        return f"{int(ttl // 86400)}d"
    return f"{ttl:g}s"


def _resolve_path(path: Path) -> Path:
    if path.is_dir():
        return path / FILE_NAME
    # Another process (a Dask worker opening the same cache) may create the directory
    # between the two checks: a path that exists now is a file only if it is not a
    # directory, else the database would be opened on the directory itself.
    if path.suffix.lower() in _FILE_SUFFIXES or (path.exists() and not path.is_dir()):
        return path
    path.mkdir(parents=True, exist_ok=True, mode=_DIR_MODE)
    return path / FILE_NAME


# The cache holds the contact email, bodies and the request history: readable by its
# owner only. A directory or file that already exists keeps the mode its owner gave it.
_DIR_MODE: Final = 0o700
_FILE_MODE: Final = 0o600


def _create_private(path: Path) -> None:
    """Create ``path`` empty with mode 0600 unless it exists (SQLite then opens it as is).

    SQLite gives its ``-wal`` and ``-shm`` files the mode of the database file.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, _FILE_MODE)
    except FileExistsError:
        return
    os.close(fd)


def _connect(path: Path, *, read_only: bool = False) -> sqlite3.Connection:
    # isolation_level=None: each statement commits on its own, so every write is one
    # atomic transaction and no read leaves a transaction open between calls.
    # check_same_thread=False only so that close() may close it from another thread;
    # each connection is otherwise used by the thread that opened it.
    # Read-only: mode=rw never creates a missing file, and query_only makes SQLite refuse
    # every write. (Not mode=ro: a read-only reader of a WAL file leaves its -wal and
    # -shm files behind, where the last ordinary connection removes them on close.)
    conn = sqlite3.connect(
        f"{path.resolve().as_uri()}?mode=rw" if read_only else path,
        timeout=_BUSY_TIMEOUT_MS / 1000,
        isolation_level=None,
        check_same_thread=False,
        uri=read_only,
    )
    try:
        if read_only:
            conn.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
            conn.execute("PRAGMA query_only = ON")
            if not _has_table(conn):
                raise sqlite3.DatabaseError("it holds no litfetch_responses table")
        else:
            _prepare(conn)
    except BaseException:
        conn.close()
        raise
    return conn


def _has_table(conn: sqlite3.Connection) -> bool:
    found = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'litfetch_responses'"
    ).fetchone()
    return found is not None


def _refuse_foreign(conn: sqlite3.Connection) -> None:
    """Raise :class:`sqlite3.DatabaseError` for a database that is someone else's.

    A file that already holds tables, none of them this cache's, belongs to
    another program: adding a table to it or switching its journal mode would
    change that program's data. Only reads happen before this check.
    """
    # One statement, one snapshot: another process may create this cache's table between
    # two separate queries, and its table must not then count as a stranger's.
    tables, ours = conn.execute(
        "SELECT count(*), coalesce(sum(name = 'litfetch_responses'), 0)"
        " FROM sqlite_master WHERE type IN ('table', 'view')"
    ).fetchone()
    if tables and not ours:
        raise sqlite3.DatabaseError(
            f"it is another program's SQLite database ({tables} tables or views, none a "
            "litfetch_df cache); left untouched: give the cache a file or directory of its own"
        )


def _prepare(conn: sqlite3.Connection) -> None:
    conn.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
    # Two processes opening a new file at the same moment can meet a lock that the busy
    # handler does not cover (the switch to WAL); retry briefly instead of failing.
    deadline = time.monotonic() + _BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            _initialise(conn)
            break
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)
    # NORMAL is crash-safe in WAL mode: a kill loses nothing committed and corrupts nothing;
    # only a power cut may lose the last few entries, which is acceptable for a cache.
    conn.execute("PRAGMA synchronous = NORMAL")


def _initialise(conn: sqlite3.Connection) -> None:
    _refuse_foreign(conn)
    (mode,) = conn.execute("PRAGMA journal_mode").fetchone()
    if str(mode).lower() != "wal":
        # Only takes effect on a new file (before its first table): it lets clear() give
        # space back without a VACUUM.
        conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
        # WAL: readers never block the writer nor see its half-done transaction.
        (mode,) = conn.execute("PRAGMA journal_mode = WAL").fetchone()
        if str(mode).lower() != "wal":
            log.warning("the response cache cannot use WAL mode here (journal_mode=%s)", mode)
    if not _has_table(conn):
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise


def _row_key(key: str) -> str:
    # The session's keys are SHA-256 digests already; anything else is hashed so that no
    # raw request text (which may hold a credential) becomes a stored key.
    if _HEX_KEY.fullmatch(key):
        return key
    return hashlib.sha256(key.encode()).hexdigest()


def _encode(content: bytes) -> tuple[str, bytes]:
    if len(content) < _COMPRESS_MIN:
        return "identity", content
    probe = content[:_PROBE]
    if len(zlib.compress(probe, 1)) > len(probe) * 7 // 8:
        return "identity", content
    # Level 1: about three times smaller on XML at a third of the default level's cost.
    return "zlib", zlib.compress(content, 1)


def _decode(stored: bytes, codec: str) -> bytes:
    if codec == "identity":
        return stored
    if codec == "zlib":
        return zlib.decompress(stored)
    raise ValueError(f"unknown codec {codec!r}")


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _utc(stamp: float | None) -> datetime | None:
    return None if stamp is None else datetime.fromtimestamp(float(stamp), tz=UTC)


class _Scrubber:
    """Replaces the request's secrets, in their plain and URL-encoded forms."""

    def __init__(self, secrets: Sequence[str]) -> None:
        forms: set[str] = set()
        short: set[str] = set()
        for secret in secrets:
            if not secret:
                continue
            variants = {secret, quote(secret, safe=""), quote_plus(secret, safe="")}
            (forms if len(secret) >= _MIN_SCRUB else short).update(variants)
        # Longest first, so that a secret containing another is replaced whole.
        self._forms = sorted(forms, key=len, reverse=True)
        self._short = sorted(short, key=len, reverse=True)
        self.unsafe = False

    def bytes(self, data: bytes) -> bytes:
        for form in self._forms:
            data = data.replace(form.encode(), _REDACTED)
        if any(form.encode() in data for form in self._short):
            self.unsafe = True
        return data

    def text(self, data: str) -> str:
        return self.bytes(data.encode("utf-8", "surrogateescape")).decode(
            "utf-8", "surrogateescape"
        )
