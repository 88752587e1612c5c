"""Opening the history database and turning driver failures into :class:`StoreError`.

SQLite (the default) is a file under the state directory, created with mode 0600 only by
an opener that asks to create it (``create=True``), in WAL mode with a busy timeout;
PostgreSQL is reached with psycopg 3
(``postgresql+psycopg://``; a bare ``postgresql://`` URL is read the same way).

With ``db.readers_group`` the SQLite files are shared with that group instead: the
database file and its WAL files mode 0640 and the state directory 0750, all of that
group, so its members can open the database read-only (``read_only``).
"""

from __future__ import annotations

import grp
import logging
import os
import pwd
import re
import sqlite3
import stat
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import quote

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError, SQLAlchemyError

from slurmsched.errors import StoreError

DEFAULT_BUSY_TIMEOUT_S = 10.0

_log = logging.getLogger(__name__)


def parse_url(url: str) -> URL:
    """Parse a database URL, mapping ``postgresql://`` to the psycopg 3 driver.

    Raises:
        StoreError: the URL is malformed, names a database slurmsched does not support,
            or gives SQLite options (``?mode=ro``: the driver ignores them).
    """
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):  # ValueError: a port that is not a number
        raise StoreError(f"not a database URL: {mask_password(url)!r}"
                         " (use sqlite:///PATH or postgresql+psycopg://...)") from None
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    if parsed.drivername not in ("sqlite", "sqlite+pysqlite", "postgresql+psycopg"):
        raise StoreError(f"unsupported database {parsed.drivername!r} in {display_url(parsed)} "
                         "(use sqlite:///PATH or postgresql+psycopg://...)")
    if parsed.get_backend_name() == "sqlite" and parsed.query:  # the driver would ignore them, or misread the path
        raise StoreError(f"SQLite URL options are not supported ({', '.join(sorted(parsed.query))} in "
                         f"{display_url(parsed)}): use sqlite:///PATH (a command that only reads opens it "
                         "read-only itself)")
    return parsed


#: Seconds to wait for a PostgreSQL server to answer a new connection (libpq's
#: ``connect_timeout``; a ``?connect_timeout=N`` in the URL wins).
PG_CONNECT_TIMEOUT_S = 10


def mask_password(url: str) -> str:
    """``url`` with any ``user:password@`` part shown as ``user:***@``; for text that may
    not parse as a URL (a config value, a mistyped ``--db``)."""
    return _USERINFO.sub(r"\1:***@", url)


_USERINFO = re.compile(r"([^/:@]+):[^@/]*@")


def display_url(url: URL | str) -> str:
    """The URL without its password, for messages."""
    parsed = make_url(url) if isinstance(url, str) else url
    return parsed.render_as_string(hide_password=True)


def make_engine(url: str, busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S, *, create: bool = False,
                state_dir: str | Path | None = None, readers_group: str = "", read_only: bool = False) -> Engine:
    """Create the engine for ``url``; a missing SQLite file is created only with ``create``.

    Args:
        url: ``sqlite:///PATH`` or ``postgresql+psycopg://...``.
        busy_timeout_s: how long SQLite waits for another writer's lock before failing.
        create: create a missing SQLite file (mode 0600). Its directory must exist,
            unless it is ``state_dir``, which is then created (mode 0700). Without
            ``create`` a missing SQLite file is refused and nothing is created.
            PostgreSQL databases are never created here.
        state_dir: the configured state directory: the one directory ``create`` may make.
        readers_group: a group that may read the SQLite database (``db.readers_group``;
            empty: none). A file created here is then mode 0640 and its new directory
            0750, of that group; each connection of a writing engine (not ``read_only``)
            gives the file, its WAL files and ``state_dir`` (when it holds the file) that
            group and its read bits, logging what it changed; nothing becomes readable by
            others. Ignored for PostgreSQL (grant a read-only role there).
        read_only: the caller only reads. A SQLite file this user cannot write is then
            opened read-only (``mode=ro`` while its ``-wal`` file exists, ``immutable=1``
            when none does: a reader may not create the WAL files), with ``query_only``
            set; nothing is written or created. Ignored for PostgreSQL.

    Raises:
        StoreError: bad URL, missing driver, ``readers_group`` not a group; for SQLite,
            a missing file without ``create``, or with it a missing directory other than
            ``state_dir`` or a file that cannot be created.
    """
    parsed = parse_url(url)
    try:
        if parsed.get_backend_name() == "sqlite":
            gid = group_id(readers_group) if readers_group and not read_only else None
            return _sqlite_engine(parsed, busy_timeout_s, create, state_dir, gid, read_only)
        logging.getLogger("psycopg").addFilter(_REDUNDANT_PSYCOPG_WARNING)  # adding it again is a no-op
        # Plan every statement when it runs: psycopg would prepare one run five times and
        # keep its generic plan, which, made while a first import's table was still empty,
        # scanned the whole table on every later lookup of the import.
        options: dict[str, Any] = {"prepare_threshold": None}
        if "connect_timeout" not in parsed.query:  # a host that drops packets must not hang a cycle
            options["connect_timeout"] = PG_CONNECT_TIMEOUT_S
        return create_engine(parsed, pool_pre_ping=True, connect_args=options)
    except (NoSuchModuleError, ImportError) as exc:
        raise StoreError(f"no driver for {display_url(parsed)}: {exc} (pip install 'slurmsched[postgres]')") from None


class _RedundantPsycopgWarning(logging.Filter):
    """Drops psycopg's "error ignored terminating <Pipeline ...>" warning.

    psycopg logs it when a failed statement of a batch (an ``executemany``, run in
    pipeline mode) also fails the pipeline's end; the statement's own error is raised
    and reported as one :class:`StoreError` line, so the warning only adds a second one.
    """

    def filter(self, record: logging.LogRecord) -> bool:  # noqa: D102 - logging API
        return not record.getMessage().startswith("error ignored terminating")


_REDUNDANT_PSYCOPG_WARNING = _RedundantPsycopgWarning()


#: Execution option that makes a transaction start with ``BEGIN IMMEDIATE`` on SQLite.
WRITE_LOCK = "slurmsched_write_lock"


def _sqlite_engine(url: URL, busy_timeout_s: float, create: bool, state_dir: str | Path | None,
                   gid: int | None, read_only: bool) -> Engine:
    """SQLite with explicit transactions: ``BEGIN IMMEDIATE`` where :data:`WRITE_LOCK` is set.

    A transaction that reads and then writes must hold the write lock from its start:
    under WAL, a deferred transaction whose snapshot is older than another process's
    commit fails at its first write at once, without waiting. So writers take the lock
    up front (waiting up to ``busy_timeout_s`` for it) and readers never block anyone.
    ``create``, ``state_dir`` and ``read_only`` are :func:`make_engine`'s; ``gid`` is its
    ``readers_group`` (``None``: private).
    """
    path = url.database
    if not path or path == ":memory:":
        raise StoreError(f"SQLite needs a file: sqlite:///PATH (got {display_url(url)})")
    if create:
        _create_private_file(Path(path), state_dir, gid)
    elif not os.path.exists(path):
        # sqlite3 would create an empty file here, owned by whoever ran the command.
        hidden = _unreachable(Path(path))  # or a file this user cannot see
        if hidden is not None:
            raise StoreError(f"cannot open database file {path}: {hidden}")
        raise StoreError(f"no database at {path}: run 'slurmsched db upgrade' (as the daemon's user)")
    read_only = read_only and not os.access(path, os.W_OK, effective_ids=True)
    if read_only:  # the URL stays the plain path, for messages; the driver gets the URI
        engine = create_engine(url, creator=lambda: sqlite3.connect(_read_only_uri(Path(path)), uri=True,
                                                                     check_same_thread=False))
    else:
        engine = create_engine(url)

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_conn, _record) -> None:  # noqa: ANN001 - DB-API connection
        dbapi_conn.isolation_level = None  # no implicit BEGIN from the driver: "begin" below
        cursor = dbapi_conn.cursor()
        cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
        if read_only:
            cursor.execute("PRAGMA query_only=ON")
        else:
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()
        if gid is not None:  # the WAL files exist now, made by this process with its group
            _share_with_group(Path(path), gid, state_dir)

    @event.listens_for(engine, "begin")
    def _begin(conn) -> None:  # noqa: ANN001 - SQLAlchemy Connection
        conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get(WRITE_LOCK) else "BEGIN")

    return engine


def _read_only_uri(path: Path) -> str:
    """The SQLite URI that reads ``path`` without writing or creating anything: ``mode=ro``
    while a writer's ``-wal`` file exists (its ``-shm`` is then there to map), else
    ``immutable=1`` (``mode=ro`` would need to create the ``-shm`` file)."""
    wal = path.with_name(path.name + "-wal")
    return f"file:{quote(os.path.abspath(path))}?" + ("mode=ro" if wal.exists() else "immutable=1")


def group_id(name: str) -> int:
    """The id of group ``name``.

    Raises:
        StoreError: no such group on this host.
    """
    try:
        return grp.getgrnam(name).gr_gid
    except KeyError:
        raise StoreError(f"no group {name!r} on this host") from None


def _share_with_group(path: Path, gid: int, state_dir: str | Path | None) -> None:
    """Give the database file ``path``, its WAL files that exist and its directory, when
    that is ``state_dir``, the group ``gid`` and that group's read bits (and search bit for
    the directory); other bits are kept, none is added for others. Each change is logged;
    one this user may not make (a file it does not own) is logged as a warning instead.
    """
    targets = [(path, 0o040), *((path.with_name(path.name + s), 0o040) for s in ("-wal", "-shm"))]
    if state_dir is not None and os.path.abspath(path.parent) == os.path.abspath(state_dir):
        targets.append((path.parent, 0o050))
    group = grp.getgrgid(gid).gr_name
    for target, bits in targets:
        try:
            info = target.stat()
        except FileNotFoundError:
            continue
        except OSError as exc:
            _log.warning("db.readers_group: cannot check %s: %s", target, exc.strerror)
            continue
        mode = stat.S_IMODE(info.st_mode)
        try:
            if info.st_gid != gid:
                os.chown(target, -1, gid)
                _log.info("db.readers_group: %s now of group %s", target, group)
            if mode | bits != mode:
                os.chmod(target, mode | bits)
                _log.info("db.readers_group: %s mode %04o -> %04o", target, mode, mode | bits)
        except OSError as exc:
            _log.warning("db.readers_group: cannot share %s with group %s: %s", target, group, exc.strerror)


def _create_private_file(path: Path, state_dir: str | Path | None, gid: int | None = None) -> None:
    """Create the database file readable by its owner only, or with ``gid`` (the readers'
    group) by that group too: mode 0600 or 0640, its new directory 0700 or 0750. An
    existing file is kept as it is (a writing connection shares it, :func:`_share_with_group`).

    Raises:
        StoreError: the file's directory does not exist and is not ``state_dir`` (a
            mistyped path must not create directories), or the file cannot be created.
    """
    parent = path.parent
    if not parent.exists():
        if state_dir is None or os.path.abspath(parent) != os.path.abspath(state_dir):
            raise StoreError(f"cannot create database file {path}: directory {parent} does not exist")
    try:
        parent.mkdir(parents=True, exist_ok=True, mode=0o700 if gid is None else 0o750)
        fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600 if gid is None else 0o640)
        os.close(fd)
    except OSError as exc:
        doing = "open database file {} for writing" if path.exists() else "create database file {}"
        problem = _access_problem(path)
        raise StoreError(f"cannot {doing.format(path)}: {exc.strerror}"
                         + (f": {problem}" if problem else "")) from None


def _user_name(uid: int) -> str:
    """The login name of ``uid``, else the number."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _unreachable(path: Path) -> str | None:
    """Why the file ``path`` cannot be reached: the first directory above it that is not a
    directory or that this user cannot search, as a clause; ``None`` when every directory
    above it exists and can be searched, or a missing one comes first."""
    for directory in reversed(Path(os.path.abspath(path)).parents):  # "/" first
        if not os.path.isdir(directory):
            return f"{directory} is not a directory" if os.path.lexists(directory) else None
        if not os.access(directory, os.X_OK, effective_ids=True):
            return f"directory {directory} is not searchable by user {_user_name(os.geteuid())}"
    return None


def _access_problem(path: Path) -> str | None:
    """What keeps this user from the files SQLite needs for the database file ``path``, as
    a clause naming the path, the user and what to do; ``None`` when the permissions allow
    it all (a failure then has another cause).

    SQLite needs every directory above the file searchable; the file readable, and
    writable to write; its WAL files (``-wal``, ``-shm``) readable and writable, even to
    read; and the directory writable while one of them (or the file) is missing. Access is
    checked for the effective user and groups, as SQLite opens files.
    """
    path = Path(os.path.abspath(path))
    unreachable = _unreachable(path)
    if unreachable is not None:
        return unreachable
    if not path.parent.is_dir():  # missing: the caller's message says so
        return None
    if path.is_dir():
        return f"{path} is a directory, not a database file"
    user = _user_name(os.geteuid())
    wal = [path.with_name(path.name + suffix) for suffix in ("-wal", "-shm")]
    if path.exists() and not os.access(path, os.R_OK, effective_ids=True):
        problems = [f"{path} is not readable by user {user}"]
    elif path.exists() and not os.access(path, os.W_OK, effective_ids=True):
        problems = [f"{path} is not writable by user {user}"]
    else:  # not named beside the file: WAL files SQLite made with its mode are fixed with it
        problems = [f"{side} is not readable and writable by user {user}" for side in wal
                    if side.exists() and not os.access(side, os.R_OK | os.W_OK, effective_ids=True)]
    missing = [p.name for p in (path, *wal) if not p.exists()]
    if missing and not os.access(path.parent, os.W_OK | os.X_OK, effective_ids=True):
        problems.append(f"directory {path.parent} is not writable by user {user} (to create "
                        f"{', '.join(missing)} there)")
    if not problems:
        return None
    owned = path if path.exists() else path.parent
    owner = owned.stat().st_uid  # reachable: checked above
    advice = ("change the permissions" if owner == os.geteuid()
              else f"run it as user {_user_name(owner)} (the owner of {owned}) or change the permissions")
    return "; ".join(problems) + f": {advice}"


@contextmanager
def store_errors(url: URL | str) -> Iterator[None]:
    """Re-raise database failures inside the block as one-line :class:`StoreError` messages."""
    try:
        yield
    except StoreError:
        raise
    except DBAPIError as exc:
        raise StoreError(describe_failure(url, exc)) from exc
    except SQLAlchemyError as exc:
        raise StoreError(f"database {display_url(url)}: {_first_line(str(exc))}") from exc
    except OverflowError as exc:  # sqlite3 rejects integers beyond 64 bits before SQL runs
        raise StoreError(f"database {display_url(url)}: value out of range: {exc}") from exc


def describe_failure(url: URL | str, exc: DBAPIError) -> str:
    """One line naming what went wrong with the database and, where known, what to do.

    A SQLite file that cannot be opened or written is named with the path this user may
    not use (:func:`_access_problem`), where the permissions are the cause.
    """
    where = display_url(url)
    text = _first_line(str(exc.orig) if exc.orig is not None else str(exc))
    lowered = text.lower()
    parsed = make_url(url) if isinstance(url, str) else url
    if parsed.get_backend_name() == "sqlite" and parsed.database and (
            "unable to open database file" in lowered or "readonly database" in lowered):
        problem = _access_problem(Path(parsed.database))
        if problem is not None:
            return f"database file {parsed.database}: {text}: {problem}"
    if "database is locked" in lowered or "database table is locked" in lowered:
        return f"database {where} is locked by another process (gave up waiting for it)"
    if "no such table" in lowered or ("relation" in lowered and "does not exist" in lowered):
        return f"database {where} has no slurmsched tables ({text}): run 'slurmsched db upgrade'"
    if "fatal:" in lowered:  # the server answered and refused: no such database, a wrong password ...
        return f"database {where} refused the connection: {text[lowered.index('fatal:') + 6:].strip()}"
    if exc.connection_invalidated or "connection" in lowered and (
            "refused" in lowered or "failed" in lowered or "timeout expired" in lowered):
        return f"cannot reach database {where}: {text}"
    return f"database {where}: {text}"


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else "unknown error"
