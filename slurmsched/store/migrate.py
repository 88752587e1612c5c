"""Schema migrations (Alembic, scripts in ``db/``) run from code: no ``alembic.ini``.

The scripts ship inside the package as ``slurmsched.migrations`` (``db/`` in the source
tree), so ``slurmsched db upgrade`` works from an installed wheel as well as from a
checkout.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config as AlembicConfig
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy import Connection, Engine

import slurmsched.migrations
from slurmsched.store.connect import WRITE_LOCK

SCRIPTS = Path(slurmsched.migrations.__file__).resolve().parent
EMPTY = "empty"


def _alembic_config(connection: Connection | None = None) -> AlembicConfig:
    config = AlembicConfig()
    config.set_main_option("script_location", str(SCRIPTS))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    """The revision this version of slurmsched needs (the newest script in ``db/versions``)."""
    head = ScriptDirectory.from_config(_alembic_config()).get_current_head()
    assert head is not None, f"no migration scripts in {SCRIPTS}"
    return head


def is_known(revision: str) -> bool:
    """Whether ``revision`` is one of this slurmsched's migration scripts."""
    try:
        return ScriptDirectory.from_config(_alembic_config()).get_revision(revision) is not None
    except CommandError:
        return False


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at, ``None`` for a database slurmsched never touched."""
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Migrate the database to ``revision`` (each step in its own transaction)."""
    with engine.connect() as conn:
        conn.execution_options(**{WRITE_LOCK: True})
        command.upgrade(_alembic_config(conn), revision)
        conn.commit()

