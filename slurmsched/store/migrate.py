"""Schema migrations (Alembic, scripts in ``db/``) run from code: no ``alembic.ini``.

The scripts ship inside the package as ``slurmsched.migrations`` (``db/`` in the source
tree), so ``slurmsched db upgrade`` works from an installed wheel as well as from a
checkout.

Alembic logs at INFO whenever it is imported and whenever it reads a revision (about ten
lines per command); those lines show only when slurmsched logs at debug (``-vv``).
"""

from __future__ import annotations

import functools
import logging
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


def _quiet_alembic() -> None:
    """Raise alembic's log level to WARNING unless slurmsched logs at debug or it was set already.

    Runs on import of this module, before alembic's own import logs, so the CLI's
    ``-v``/``-vv`` (configured before any command loads the store) decides.
    """
    alembic_log = logging.getLogger("alembic")
    if alembic_log.level == logging.NOTSET and not logging.getLogger("slurmsched").isEnabledFor(logging.DEBUG):
        alembic_log.setLevel(logging.WARNING)


_quiet_alembic()

from alembic import command  # noqa: E402 - after _quiet_alembic: importing alembic logs
from alembic.config import Config as AlembicConfig  # noqa: E402
from alembic.runtime.migration import MigrationContext  # noqa: E402
from alembic.script import ScriptDirectory  # noqa: E402
from alembic.util import CommandError  # noqa: E402
from sqlalchemy import Connection, Engine, text  # noqa: E402

import slurmsched.migrations  # noqa: E402
from slurmsched.store.connect import WRITE_LOCK  # noqa: E402

SCRIPTS = Path(slurmsched.migrations.__file__).resolve().parent
EMPTY = "empty"
#: Key of the PostgreSQL advisory lock that concurrent upgrades take turns on ("sched").
_UPGRADE_LOCK_KEY = 0x7363686564


def _alembic_config(connection: Connection | None = None) -> AlembicConfig:
    config = AlembicConfig()
    config.set_main_option("script_location", str(SCRIPTS))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


@functools.cache
def _scripts() -> ScriptDirectory:
    """The migration scripts, read once per process (they do not change while it runs)."""
    return ScriptDirectory.from_config(_alembic_config())


def head_revision() -> str:
    """The revision this version of slurmsched needs (the newest script in ``db/versions``)."""
    head = _scripts().get_current_head()
    assert head is not None, f"no migration scripts in {SCRIPTS}"
    return head


def is_known(revision: str) -> bool:
    """Whether ``revision`` is one of this slurmsched's migration scripts."""
    try:
        return _scripts().get_revision(revision) is not None
    except CommandError:
        return False


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at, ``None`` for a database slurmsched never touched."""
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def upgrade(engine: Engine, revision: str = "head") -> list[tuple[str | None, str]]:
    """Migrate the database to ``revision``: on PostgreSQL each step in its own transaction,
    under an advisory lock held for the whole upgrade; on SQLite all steps in one
    transaction, under the write lock taken before the revision is read.

    Upgrades run at the same time (two ``db upgrade``, or one beside the first
    ``history import`` into an empty database) take turns, so the later one finds the
    steps done instead of failing on tables the other created.

    Returns:
        The steps this call applied, in order, as ``(from, to)`` revisions (``from`` is
        ``None`` for the first script): empty when another upgrade had already made them.
    """
    applied: list[tuple[str | None, str]] = []
    with engine.connect() as conn, _one_upgrade_at_a_time(conn):
        conn.execution_options(**{WRITE_LOCK: True})
        if conn.dialect.name == "sqlite":
            conn.begin()  # alembic, which takes SQLite's DDL for non-transactional, would commit each step
        config = _alembic_config(conn)
        config.attributes["applied"] = applied
        command.upgrade(config, revision)
        conn.commit()
    return applied


@contextmanager
def _one_upgrade_at_a_time(conn: Connection) -> Iterator[None]:
    """Hold PostgreSQL's upgrade advisory lock on ``conn`` for the block (on SQLite the whole
    upgrade is one transaction that holds the write lock).

    The lock belongs to the database session, so the connection is closed afterwards rather
    than returned to the pool: that releases it however the block ended.
    """
    if conn.dialect.name != "postgresql":
        yield
        return
    try:
        conn.execute(text("SELECT pg_advisory_lock(:key)"), {"key": _UPGRADE_LOCK_KEY})
        conn.commit()
        yield
    finally:
        conn.invalidate()
