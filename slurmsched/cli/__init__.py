"""The ``slurmsched`` command line (click).

Each command family lives in its own module and is registered here. Every option has
an environment-variable twin, named in its ``--help``: the config key's variable for an
option that mirrors one (``--db``: ``SLURMSCHED_DB_URL``), else
``SLURMSCHED_<COMMAND>_<OPTION>`` (``SLURMSCHED_HISTORY_IMPORT_BATCH_SIZE``); settings that the daemon also
reads come from the TOML config (``--config`` / ``SLURMSCHED_CONFIG``).
"""

from __future__ import annotations

import io
import logging
import os
import sys

import click

from slurmsched import LOG_FORMAT, __version__
from slurmsched.config import Config, load_config
from slurmsched.errors import SlurmschedError


#: Exit status of a command that failed on a :class:`SlurmschedError` (bad input, Slurm
#: or the database unreachable, ...).
EXIT_ERROR = 2
#: Exit status of a command that failed on any other exception: a bug in slurmsched.
EXIT_INTERNAL = 3
#: Exit status when the reader of the output went away (128 + SIGPIPE, as a shell shows it).
EXIT_BROKEN_PIPE = 141


class _Group(click.Group):
    """A group that turns :class:`SlurmschedError` into ``error: ...`` and exit 2, and any
    other exception (a bug) into one ``error: internal error ...`` line and exit 3, with the
    traceback logged at debug level (``-vv``); output to a closed pipe ends quietly (exit
    141). click's own exits pass through."""

    def invoke(self, ctx: click.Context):  # noqa: D102 - click API
        try:
            return super().invoke(ctx)
        except SlurmschedError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(EXIT_ERROR)
        except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except BrokenPipeError:
            # The reader left (``slurmsched status | head``): stop quietly, as a command
            # killed by SIGPIPE would; output still buffered goes nowhere at exit.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.exit(EXIT_BROKEN_PIPE)
        except Exception as exc:  # noqa: BLE001 - the last line of defence: no traceback to the user
            logging.getLogger(__name__).debug("internal error", exc_info=True)
            click.echo(f"error: internal error: {type(exc).__name__}: {exc} (a bug in slurmsched: "
                       "run again with -vv for the traceback, and please report it)", err=True)
            sys.exit(EXIT_INTERNAL)


@click.group(cls=_Group, context_settings={"auto_envvar_prefix": "SLURMSCHED", "help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="slurmsched")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None,
              envvar="SLURMSCHED_CONFIG", allow_from_autoenv=False, show_envvar=True,
              help="TOML config file (default /etc/slurmsched/slurmsched.toml).")
@click.option("-v", "--verbose", count=True, envvar="SLURMSCHED_VERBOSE", show_envvar=True,
              help="More log output (-vv for debug).")
@click.pass_context
def main(ctx: click.Context, config_path: str | None, verbose: int) -> None:
    """slurmsched: shorter GPU queues by nudging Slurm's own scheduler."""
    logging.basicConfig(level=logging.WARNING - 10 * min(verbose, 2), format=LOG_FORMAT)
    if isinstance(sys.stdout, io.TextIOWrapper) and sys.stdout.errors == "strict":
        # A character the locale's encoding cannot write (a path with an emoji under
        # latin-1) is printed as '?', not an internal error after the work is done.
        sys.stdout.reconfigure(errors="replace")
    ctx.obj = _LazyConfig(config_path)


class _LazyConfig:
    """Loads the config on first use, so commands that need none never fail on it."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self._config: Config | None = None

    def get(self) -> Config:
        """The validated configuration (raises ConfigError on a broken file)."""
        if self._config is None:
            self._config = load_config(self.path)
        return self._config


def get_config(ctx: click.Context) -> Config:
    """The current command's configuration."""
    lazy = ctx.find_object(_LazyConfig)
    assert lazy is not None  # main() puts it on the root context of every command
    return lazy.get()


def _register() -> None:
    from slurmsched.cli import cluster, daemon, db, history, predict, simulate

    for module in (cluster, daemon, db, history, predict, simulate):
        for command in module.COMMANDS:
            main.add_command(command)


_register()
