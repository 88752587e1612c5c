"""``db downgrade``: every step undone for real on SQLite and PostgreSQL, compared with fresh upgrades."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest
from sqlalchemy import Engine, create_engine, inspect, make_url, select, text

from slurmsched.errors import MigrationRefused
from slurmsched.store import migrate
from slurmsched.store.connect import display_url
from slurmsched.store.repository import SqlJobRepository
from slurmsched.store.schema import Base

OLDER = [*reversed(migrate.revisions()[:-1]), migrate.EMPTY]  # 0003, 0002, 0001, empty: every downgrade target
FRESH_PG = "slurmsched_fresh"


@pytest.fixture
def fresh_url(db_url: str, tmp_path: Path) -> Iterator[str]:
    """A second empty database of ``db_url``'s kind, for the schemas that upgrades of a fresh database make."""
    if db_url.startswith("sqlite"):
        yield f"sqlite:///{tmp_path / 'fresh.db'}"
        return
    server = create_engine(db_url, isolation_level="AUTOCOMMIT")
    try:
        with server.connect() as conn:
            conn.execute(text(f"DROP DATABASE IF EXISTS {FRESH_PG} WITH (FORCE)"))
            conn.execute(text(f"CREATE DATABASE {FRESH_PG}"))
        yield make_url(db_url).set(database=FRESH_PG).render_as_string(hide_password=False)
        with server.connect() as conn:
            conn.execute(text(f"DROP DATABASE {FRESH_PG} WITH (FORCE)"))
    finally:
        server.dispose()


def _schema(engine: Engine) -> dict[str, Any]:
    """Every table but alembic_version: its columns (in order, with type, nullability and
    default), primary key, indexes, unique constraints and foreign keys."""
    with engine.connect() as conn:
        found = inspect(conn)
        return {name: ([(c["name"], str(c["type"]), c["nullable"], c["default"]) for c in found.get_columns(name)],
                       found.get_pk_constraint(name)["constrained_columns"],
                       sorted(map(repr, found.get_indexes(name))),
                       sorted(map(repr, found.get_unique_constraints(name))),
                       sorted(map(repr, found.get_foreign_keys(name))))
                for name in found.get_table_names() if name != "alembic_version"}


def _fresh_schemas(url: str) -> dict[str, dict[str, Any]]:
    """The schema a fresh database has at each revision (``empty`` included), upgraded one step at a time."""
    repo = SqlJobRepository.from_url(url, create=True)
    try:
        schemas = {migrate.EMPTY: _schema(repo.engine)}
        for revision in migrate.revisions():
            migrate.upgrade(repo.engine, revision)
            schemas[revision] = _schema(repo.engine)
        return schemas
    finally:
        repo.close()


def _fill(engine: Engine) -> None:
    """Two rows in every table of the current schema: row i holds i, float(i), 'v<i>' ... in
    each column (so cycle 1 is a dry run, cycle 2 not, and rows 1 and 2 refer to cycles 1 and 2)."""
    values = {int: lambda i: i, float: float, str: lambda i: f"v{i}", bool: lambda i: i == 1,
              bytes: lambda i: bytes([i]), object: lambda i: {"n": i}}  # object: JSON
    with engine.begin() as conn:
        for table in Base.metadata.sorted_tables:
            conn.execute(table.insert(), [{c.name: values[c.type.python_type](i) for c in table.columns}
                                          for i in (1, 2)])


#: Columns a downgrade drops and an upgrade makes again with other values: 0002 fills
#: ``cycles.kind`` from ``dry_run``, 0004 leaves ``control.cluster`` empty.
REMADE = {("cycles", "kind"), ("control", "cluster")}


def _contents(engine: Engine) -> dict[str, list[str]]:
    """The rows of every table of the current schema, but the :data:`REMADE` columns."""
    with engine.connect() as conn:
        return {table.name: sorted(map(repr, conn.execute(select(*[c for c in table.columns
                                                                   if (table.name, c.name) not in REMADE]))))
                for table in Base.metadata.sorted_tables}


@pytest.mark.parametrize("target", OLDER)
def test_downgrade_to_each_older_revision_and_back(db_url: str, fresh_url: str, target: str) -> None:
    """From head with rows in every table down to ``target``: the schema a fresh upgrade to it
    makes, the rows of the tables it keeps kept; upgraded again: head's schema, the rows still there."""
    fresh = _fresh_schemas(fresh_url)
    repo = SqlJobRepository.from_url(db_url, create=True)
    try:
        repo.upgrade()
        _fill(repo.engine)
        before = _contents(repo.engine)
        plan = repo.plan_downgrade(target)
        repo.downgrade(plan)
        assert repo.schema_revision() == (None if target == migrate.EMPTY else target)
        assert _schema(repo.engine) == fresh[target]
        with repo.engine.connect() as conn:
            for name, rows in before.items():
                if name in fresh[target]:
                    assert conn.execute(text(f"SELECT count(*) FROM {name}")).scalar_one() == len(rows), name
        repo.upgrade()
        assert _schema(repo.engine) == fresh[migrate.head_revision()]
        assert _contents(repo.engine) == (before if target != migrate.EMPTY else {name: [] for name in before})
        with repo.engine.connect() as conn:
            kinds = conn.execute(text("SELECT kind FROM cycles ORDER BY id")).scalars().all()
            clusters = conn.execute(text("SELECT cluster FROM control ORDER BY id")).scalars().all()
        # 0002 undone and made again: the kind comes from dry_run (cycle 1 is a dry run); else it stays
        assert kinds == {"0003": ["v1", "v2"], "0002": ["v1", "v2"], "0001": ["dry-run", "live"],
                         migrate.EMPTY: []}[target]
        # 0004 undone and made again: no cluster has claimed the database
        assert clusters == ([] if target == migrate.EMPTY else [None, None])
    finally:
        repo.close()


def test_plan_names_what_each_downgrade_drops_and_the_rows_lost(repo: SqlJobRepository) -> None:
    _fill(repo.engine)
    to_0003 = repo.plan_downgrade("0003")
    assert (to_0003.current, to_0003.target, [rev for rev, _ in to_0003.steps]) == ("0004", "0003", ["0004"])
    assert (to_0003.drops, to_0003.rows, to_0003.creates) == ((("column", "control", "cluster"),),
                                                              {("control", "cluster"): 2}, ())
    to_0002 = repo.plan_downgrade("0002")
    assert [rev for rev, _ in to_0002.steps] == ["0004", "0003"]
    assert to_0002.creates == (("index", "jobs", "ix_jobs_cluster_job"),)
    to_0001 = repo.plan_downgrade("0001")
    assert [rev for rev, _ in to_0001.steps] == ["0004", "0003", "0002"]
    assert to_0001.steps[2][1] == "Cycle kind: each cycle row says whether it was live, dry-run, paused or a revert pass."
    assert (to_0001.drops, to_0001.rows) == ((("column", "control", "cluster"), ("column", "cycles", "kind")),
                                             {("control", "cluster"): 2, ("cycles", "kind"): 2})
    to_empty = repo.plan_downgrade(migrate.EMPTY)
    assert (to_empty.target, [rev for rev, _ in to_empty.steps]) == (None, ["0004", "0003", "0002", "0001"])
    assert to_empty.drops == tuple(("table", name, "") for name in sorted(Base.metadata.tables))
    assert set(to_empty.rows.values()) == {2} and to_empty.creates == ()


def test_refusals_name_the_problem_and_change_nothing(db_url: str) -> None:
    repo = SqlJobRepository.from_url(db_url, create=True)
    try:
        with pytest.raises(MigrationRefused, match=r"^the database is empty \(no schema\): nothing to downgrade$"):
            repo.plan_downgrade("0001")
        repo.upgrade()
        with pytest.raises(MigrationRefused, match=r"^unknown revision 'base': this slurmsched knows empty, 0001, "):
            repo.plan_downgrade("base")  # alembic's name for empty, and its relative forms, are not taken
        with pytest.raises(MigrationRefused, match=r"^unknown revision '-1'"):
            repo.plan_downgrade("-1")
        with pytest.raises(MigrationRefused, match=r"^0004 is not older than the database's revision 0004: "
                                                   r"a downgrade goes to empty, 0001, 0002, 0003$"):
            repo.plan_downgrade("0004")
        plan = repo.plan_downgrade("0002")
        repo.downgrade(repo.plan_downgrade("0001"))
        with pytest.raises(MigrationRefused, match=r"^the database moved from 0004 to 0001 since the downgrade "
                                                   r"was planned: nothing changed, run it again$"):
            repo.downgrade(plan)
        assert repo.schema_revision() == "0001"
        with repo.engine.begin() as conn:
            conn.execute(text("UPDATE alembic_version SET version_num = 'f00d'"))
        with pytest.raises(MigrationRefused, match=r"^database schema is at f00d, newer than this slurmsched "
                                                   r"knows: downgrade it with the slurmsched that upgraded it$"):
            repo.plan_downgrade("0001")
    finally:
        repo.close()


def test_a_failing_step_leaves_the_database_as_it_was(db_url: str, cli) -> None:
    """All steps in one transaction on both databases: 0003's index, re-made, goes with 0002's failure."""
    repo = SqlJobRepository.from_url(db_url, create=True)
    try:
        repo.upgrade()
        with repo.engine.begin() as conn:  # a view on cycles.kind: neither database drops the column under it
            conn.execute(text("CREATE VIEW cycle_kinds AS SELECT id, kind FROM cycles"))
        before = _schema(repo.engine)
        result = cli("db", "downgrade", "0001", "--yes", "--db", db_url)
        assert result.returncode == 2 and "internal error" not in result.stderr
        assert result.stderr.startswith("error: database ") and "kind" in result.stderr, result.stderr
        assert repo.schema_revision() == "0004"
        assert _schema(repo.engine) == before
    finally:
        repo.close()


def test_db_downgrade_command(db_url: str, cli) -> None:
    shown = display_url(db_url)
    assert cli("db", "upgrade", "--db", db_url).returncode == 0
    missing = cli("db", "downgrade", "--db", db_url)
    assert missing.returncode == 2 and "Missing argument 'REVISION'" in missing.stderr
    listed = [f"{shown}: downgrade from 0004 to 0001 undoes 3 steps:",
              "  0004: Database owner: the control row names the cluster whose daemon keeps its state here.",
              "  0003: Drop ``ix_jobs_cluster_job``: the unique constraint already indexes its columns.",
              "  0002: Cycle kind: each cycle row says whether it was live, dry-run, paused or a revert pass.",
              "drops column control.cluster: its values in 0 rows are lost",
              "drops column cycles.kind: its values in 0 rows are lost",
              "creates index ix_jobs_cluster_job on jobs",
              "The data in dropped tables and columns is lost for good: a later 'db upgrade' does not bring it back."]
    unconfirmed = cli("db", "downgrade", "0001", "--db", db_url)
    assert unconfirmed.returncode == 2
    assert unconfirmed.stdout.splitlines() == listed
    assert unconfirmed.stderr == ("error: nothing changed: run it again with --yes (SLURMSCHED_DB_DOWNGRADE_YES=1) "
                                  "to downgrade\n")
    dry = cli("db", "downgrade", "0001", "--dry-run", "--yes", "--db", db_url)
    assert dry.returncode == 0 and dry.stdout.splitlines() == [*listed, "dry run: nothing changed"]
    assert "0004 (head)" in cli("db", "current", "--db", db_url).stdout
    not_older = cli("db", "downgrade", "0004", "--yes", "--db", db_url)
    assert not_older.returncode == 2 and not_older.stdout == ""
    assert not_older.stderr == ("error: 0004 is not older than the database's revision 0004: "
                                "a downgrade goes to empty, 0001, 0002, 0003\n")
    down = cli("db", "downgrade", "0002", env={"SLURMSCHED_DB_DOWNGRADE_YES": "1", "SLURMSCHED_DB_URL": db_url})
    assert down.returncode == 0, down.stderr
    assert down.stdout.splitlines()[-3:] == ["creates index ix_jobs_cluster_job on jobs",
                                             "The data in dropped tables and columns is lost for good: a later"
                                             " 'db upgrade' does not bring it back.",
                                             f"{shown}: downgraded from 0004 to 0002"]
    current = cli("db", "current", "--db", db_url)
    assert current.returncode == 1 and current.stdout.startswith("0002 (this slurmsched needs 0004")
    down = cli("db", "downgrade", current.stdout.split()[0], "--yes", "--db", db_url)  # what db current printed
    assert down.returncode == 2 and "is not older than the database's revision 0002" in down.stderr
    down = cli("db", "downgrade", "empty", "--yes", "--db", db_url)
    assert down.returncode == 0, down.stderr
    assert "drops table jobs: its 0 rows are lost" in down.stdout
    assert down.stdout.splitlines()[-1] == f"{shown}: downgraded from 0002 to empty"
    current = cli("db", "current", "--db", db_url)
    assert current.returncode == 1 and current.stdout.startswith("empty (")
    assert cli("db", "upgrade", "--db", db_url).stdout.strip() == f"{shown}: upgraded from empty to 0004"
