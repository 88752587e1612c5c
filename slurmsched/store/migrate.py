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
from dataclasses import dataclass
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
from sqlalchemy import Connection, Engine, column, create_engine, func, inspect, select, table, text  # noqa: E402
from sqlalchemy.pool import StaticPool  # noqa: E402

import slurmsched.migrations  # noqa: E402
from slurmsched.errors import MigrationRefused  # noqa: E402
from slurmsched.store.connect import WRITE_LOCK  # noqa: E402

SCRIPTS = Path(slurmsched.migrations.__file__).resolve().parent
EMPTY = "empty"
#: Key of the PostgreSQL advisory lock that concurrent migrations take turns on ("sched").
_MIGRATION_LOCK_KEY = 0x7363686564


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


def revisions() -> list[str]:
    """Every revision this slurmsched knows, oldest first."""
    return [script.revision for script in reversed(list(_scripts().walk_revisions()))]


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
    with engine.connect() as conn, _one_migration_at_a_time(conn):
        conn.execution_options(**{WRITE_LOCK: True})
        if conn.dialect.name == "sqlite":
            conn.begin()  # alembic, which takes SQLite's DDL for non-transactional, would commit each step
        config = _alembic_config(conn)
        config.attributes["applied"] = applied
        command.upgrade(config, revision)
        conn.commit()
    return applied


@dataclass(frozen=True)
class DowngradePlan:
    """What a downgrade does: :func:`plan_downgrade` makes it, :func:`downgrade` runs it.

    Attributes:
        current: the database's revision when the plan was made.
        target: the revision it goes to, ``None`` for empty (every table dropped).
        steps: each step undone, newest first: the revision and the first paragraph of its
            script's docstring (what it brought).
        drops: what the downgrade removes, as ``(kind, table, name)`` with kind ``table``
            (name empty), ``column`` or ``index``; the columns and indexes of a dropped
            table go with it and are not listed.
        rows: for each dropped table, its rows; for each dropped column, the rows that hold
            a value in it (``(table, name)`` as in ``drops``): the data that is lost.
        creates: what the downgrade makes again (an index a later step dropped), as in
            ``drops`` (a table without its columns and indexes).
    """

    current: str
    target: str | None
    steps: tuple[tuple[str, str], ...]
    drops: tuple[tuple[str, str, str], ...]
    rows: dict[tuple[str, str], int]
    creates: tuple[tuple[str, str, str], ...]


def plan_downgrade(engine: Engine, target: str) -> DowngradePlan:
    """What downgrading the database to ``target`` would do; nothing is changed.

    What the steps drop and create is the difference between the schemas that migrating
    an empty (in-memory SQLite) database to the current and to the target revision makes,
    so it assumes, as every script in ``db/versions`` does, that a step makes the same
    tables, columns and indexes on SQLite and PostgreSQL.

    Args:
        target: a revision this slurmsched knows, or ``empty`` (as ``db current`` prints them).

    Raises:
        MigrationRefused: ``target`` is unknown, or not older than the database's revision;
            the database is empty, or at a revision this slurmsched does not know.
    """
    known = revisions()
    if target != EMPTY and target not in known:
        raise MigrationRefused(f"unknown revision {target!r}: this slurmsched knows {', '.join([EMPTY, *known])}")
    current = current_revision(engine)
    if current is None:
        raise MigrationRefused("the database is empty (no schema): nothing to downgrade")
    if current not in known:
        raise MigrationRefused(f"database schema is at {current}, newer than this slurmsched knows: downgrade "
                               "it with the slurmsched that upgraded it")
    order = [EMPTY, *known]
    older = order[:order.index(current)]
    if target not in older:
        raise MigrationRefused(f"{target} is not older than the database's revision {current}: "
                               f"a downgrade goes to {', '.join(older)}")
    goal = None if target == EMPTY else target
    undone = reversed(order[order.index(target) + 1:order.index(current) + 1])
    steps = tuple((rev, " ".join(_scripts().get_revision(rev).doc.split())) for rev in undone)
    now, then = _schema_at(current), _schema_at(goal)
    drops = _outermost(now - then)
    with engine.connect() as conn:
        rows = {(name, col): _rows_with(conn, name, col) for kind, name, col in drops if kind != "index"}
    return DowngradePlan(current, goal, steps, drops, rows, _outermost(then - now))


def downgrade(engine: Engine, plan: DowngradePlan) -> None:
    """Run ``plan``'s steps, all in one transaction (on SQLite under the write lock, on
    PostgreSQL under the advisory lock upgrades take): a step that fails leaves the
    database at ``plan.current``.

    Raises:
        MigrationRefused: the database is no longer at ``plan.current`` (another
            migration ran since the plan was made); nothing is changed.
    """
    with engine.connect() as conn, _one_migration_at_a_time(conn):
        conn.execution_options(**{WRITE_LOCK: True})
        conn.begin()
        found = MigrationContext.configure(conn).get_current_revision()
        if found != plan.current:
            raise MigrationRefused(f"the database moved from {plan.current} to {found or EMPTY} since the "
                                   "downgrade was planned: nothing changed, run it again")
        command.downgrade(_alembic_config(conn), plan.target or "base")
        conn.commit()


@functools.cache
def _schema_at(revision: str | None) -> frozenset[tuple[str, str, str]]:
    """The tables, columns and indexes (as in :attr:`DowngradePlan.drops`) that migrating an
    empty in-memory SQLite database to ``revision`` makes (``None``: none)."""
    engine = create_engine("sqlite://", poolclass=StaticPool)
    try:
        with engine.connect() as conn:
            if revision is not None:
                command.upgrade(_alembic_config(conn), revision)
            found = inspect(conn)
            items = set()
            for name in set(found.get_table_names()) - {"alembic_version"}:
                items.add(("table", name, ""))
                items.update(("column", name, col["name"]) for col in found.get_columns(name))
                items.update(("index", name, str(ix["name"])) for ix in found.get_indexes(name))
            return frozenset(items)
    finally:
        engine.dispose()


def _outermost(items: frozenset[tuple[str, str, str]]) -> tuple[tuple[str, str, str], ...]:
    """``items`` (as in :attr:`DowngradePlan.drops`), sorted, without the columns and
    indexes of the tables among them."""
    tables = {name for kind, name, _ in items if kind == "table"}
    return tuple(sorted(item for item in items if item[0] == "table" or item[1] not in tables))


def _rows_with(conn: Connection, name: str, col: str) -> int:
    """The rows of table ``name``, or (with ``col``) those holding a value in column ``col``."""
    query = select(func.count()).select_from(table(name))
    if col:
        query = query.where(column(col).is_not(None))
    return conn.execute(query).scalar_one()


@contextmanager
def _one_migration_at_a_time(conn: Connection) -> Iterator[None]:
    """Hold PostgreSQL's migration advisory lock on ``conn`` for the block (on SQLite the
    whole migration is one transaction that holds the write lock).

    The lock belongs to the database session, so the connection is closed afterwards rather
    than returned to the pool: that releases it however the block ended.
    """
    if conn.dialect.name != "postgresql":
        yield
        return
    try:
        conn.execute(text("SELECT pg_advisory_lock(:key)"), {"key": _MIGRATION_LOCK_KEY})
        conn.commit()
        yield
    finally:
        conn.invalidate()
