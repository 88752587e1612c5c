"""``slurmsched db``: create and migrate the history database."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from slurmsched.cli import get_config

if TYPE_CHECKING:
    from slurmsched.store.migrate import DowngradePlan
    from slurmsched.store.repository import SqlJobRepository

DB_OPTION = click.option("--db", "db_url", metavar="URL", default=None, envvar="SLURMSCHED_DB_URL",
                         show_envvar=True, allow_from_autoenv=False,
                         help="Database URL (default: db.url from the config, else SQLite under daemon.state_dir).")


def open_unchecked(ctx: click.Context, db_url: str | None, *, create: bool = False,
                   read_only: bool = False) -> "SqlJobRepository":
    """The configured (or ``--db``) database, without checking its schema.

    Args:
        create: create a missing SQLite file (only ``db upgrade``; see
            :meth:`SqlJobRepository.from_url`); otherwise a missing one is an error.
        read_only: the command only reads (``db current``): it works for a user who may
            only read the database, and writes nothing beside it.
    """
    from slurmsched.store.repository import SqlJobRepository  # SQLAlchemy/Alembic load only when used

    return SqlJobRepository.from_config(get_config(ctx), create=create, url=db_url, read_only=read_only)


@click.group("db")
def db() -> None:
    """Create, migrate and inspect the history database."""


@db.command("upgrade")
@DB_OPTION
@click.pass_context
def upgrade(ctx: click.Context, db_url: str | None) -> None:
    """Migrate the database to the schema this slurmsched needs (creates it if new).

    A new SQLite file (mode 0600, owned by the user running this: run it as the daemon's
    user) is created in an existing directory, or in daemon.state_dir, made if missing.
    """
    from slurmsched.store.migrate import EMPTY

    repo = open_unchecked(ctx, db_url, create=True)
    try:
        applied = repo.upgrade()  # the steps this run made: another upgrade may have made them
        after = repo.schema_revision()
    finally:
        repo.close()
    if not applied:
        click.echo(f"{repo.url}: already at {after}")
    else:
        click.echo(f"{repo.url}: upgraded from {applied[0][0] or EMPTY} to {after}")


@db.command("current")
@DB_OPTION
@click.pass_context
def current(ctx: click.Context, db_url: str | None) -> None:
    """Show the database's schema revision and whether it is up to date (exit 1 if not)."""
    from slurmsched.store import migrate

    repo = open_unchecked(ctx, db_url, read_only=True)
    try:
        revision = repo.schema_revision()
    finally:
        repo.close()
    needed = migrate.head_revision()
    if revision == needed:
        click.echo(f"{revision} (head)")
        return
    if revision is not None and not migrate.is_known(revision):
        click.echo(f"{revision} (newer than this slurmsched knows, which needs {needed}: upgrade slurmsched)")
    else:
        click.echo(f"{revision or migrate.EMPTY} (this slurmsched needs {needed}: run 'slurmsched db upgrade')")
    ctx.exit(1)


@db.command("release")
@DB_OPTION
@click.pass_context
def release(ctx: click.Context, db_url: str | None) -> None:
    """Forget which cluster's daemon keeps its state in the database (after a ClusterName change).

    The first cycle of a daemon claims its database for its cluster, and the daemon and
    'revert' of any other cluster refuse it. After a rename, release it (with the daemon
    stopped): the next cycle claims it for the cluster's new name.
    """
    from slurmsched.store.repository import open_repository

    repo = open_repository(get_config(ctx), url=db_url)
    try:
        owner = repo.release()
    finally:
        repo.close()
    if owner is None:
        click.echo(f"{repo.url}: no cluster's daemon had claimed it")
    else:
        click.echo(f"{repo.url}: released by cluster {owner!r}; the next daemon cycle claims it")


@db.command("downgrade")
@click.argument("revision")
@click.option("--yes", is_flag=True, envvar="SLURMSCHED_DB_DOWNGRADE_YES", allow_from_autoenv=False,
              show_envvar=True, help="Downgrade, dropping what the list names with its data.")
@click.option("--dry-run", is_flag=True, envvar="SLURMSCHED_DB_DOWNGRADE_DRY_RUN", allow_from_autoenv=False,
              show_envvar=True, help="List the steps and what they drop; change nothing (even with --yes).")
@DB_OPTION
@click.pass_context
def downgrade(ctx: click.Context, revision: str, yes: bool, dry_run: bool, db_url: str | None) -> None:
    """Migrate the database back to REVISION (as 'db current' prints it: 0002, or empty) for an older slurmsched.

    Lists the steps it undoes and what they drop: the data in dropped tables and columns
    is lost. Changes nothing without --yes. Stop the daemon first, and run it with this
    slurmsched, before installing the older one: only this one knows the steps.
    """
    from slurmsched.errors import MigrationRefused
    from slurmsched.store.migrate import EMPTY

    repo = open_unchecked(ctx, db_url, read_only=dry_run)
    try:
        plan = repo.plan_downgrade(revision)
        click.echo(downgrade_text(repo.url, plan))
        if dry_run:
            click.echo("dry run: nothing changed")
            return
        if not yes:
            raise MigrationRefused("nothing changed: run it again with --yes (SLURMSCHED_DB_DOWNGRADE_YES=1) "
                                   "to downgrade")
        repo.downgrade(plan)
    finally:
        repo.close()
    click.echo(f"{repo.url}: downgraded from {plan.current} to {plan.target or EMPTY}")


def downgrade_text(url: str, plan: "DowngradePlan") -> str:
    """The lines ``db downgrade`` prints before it acts: the steps, what they drop (with the
    rows whose data is lost) and what they create."""
    from slurmsched.store.migrate import EMPTY
    from slurmsched.text import plural

    def name(kind: str, table: str, item: str) -> str:
        return {"table": table, "column": f"{table}.{item}", "index": f"{item} on {table}"}[kind]

    lines = [f"{url}: downgrade from {plan.current} to {plan.target or EMPTY} undoes "
             f"{plural(len(plan.steps), 'step')}:"]
    lines += [f"  {revision}: {doc}" for revision, doc in plan.steps]
    for kind, table, item in plan.drops:
        lost = (f"its {plural(plan.rows[table, item], 'row')} are lost" if kind == "table" else
                f"its values in {plural(plan.rows[table, item], 'row')} are lost" if kind == "column" else
                "no data is lost")
        lines.append(f"drops {kind} {name(kind, table, item)}: {lost}")
    lines += [f"creates {kind} {name(kind, table, item)}" for kind, table, item in plan.creates]
    if any(kind != "index" for kind, _, _ in plan.drops):
        lines.append("The data in dropped tables and columns is lost for good: a later 'db upgrade' does not "
                     "bring it back.")
    return "\n".join(lines)


COMMANDS = [db]
