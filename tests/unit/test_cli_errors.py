"""How the command line ends a command that failed: one ``error:`` line, never a traceback."""

from __future__ import annotations

import logging
import subprocess
import sys

import click
from click.testing import CliRunner

from slurmsched.cli import EXIT_BROKEN_PIPE, EXIT_ERROR, EXIT_INTERNAL, _Group
from slurmsched.errors import ConfigError


@click.group(cls=_Group)
def group() -> None:
    """A group like ``slurmsched``'s, with commands that fail in each way."""


@group.command("typed")
def typed() -> None:
    raise ConfigError("daemon.interval_s must be > 0 (got -1)")


@group.command("bug")
def bug() -> None:
    raise ValueError("cannot convert float NaN to integer")


@group.command("exits")
@click.pass_context
def exits(ctx: click.Context) -> None:
    click.echo("no record of job 7", err=True)
    ctx.exit(1)


def test_a_typed_error_is_one_line_and_exit_2():
    result = CliRunner().invoke(group, ["typed"])
    assert result.exit_code == EXIT_ERROR == 2
    assert result.stderr == "error: daemon.interval_s must be > 0 (got -1)\n"


def test_a_bug_is_one_line_and_exit_3_with_the_traceback_at_debug(caplog):
    with caplog.at_level(logging.DEBUG, logger="slurmsched.cli"):
        result = CliRunner().invoke(group, ["bug"])
    assert result.exit_code == EXIT_INTERNAL == 3
    assert result.stderr == ("error: internal error: ValueError: cannot convert float NaN to integer (a bug in "
                             "slurmsched: run again with -vv for the traceback, and please report it)\n")
    assert "Traceback" not in result.output
    (record,) = [r for r in caplog.records if r.message == "internal error"]
    assert record.levelno == logging.DEBUG and record.exc_info[0] is ValueError


def test_clicks_own_exits_and_usage_errors_pass_through():
    assert CliRunner().invoke(group, ["exits"]).exit_code == 1
    usage = CliRunner().invoke(group, ["nosuch"])
    assert usage.exit_code == 2 and "No such command 'nosuch'" in usage.stderr


def test_output_to_a_closed_pipe_ends_quietly():
    """``slurmsched status | head -1``: no 'internal error', no 'Exception ignored' at exit."""
    program = ("import click\nfrom slurmsched.cli import _Group\n"
               "@click.group(cls=_Group)\ndef group(): pass\n"
               "@group.command()\ndef lines():\n    for i in range(200000): click.echo(f'line {i}')\n"
               "group(['lines'])\n")
    writer = subprocess.Popen([sys.executable, "-c", program], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    reader = subprocess.Popen(["head", "-n", "1"], stdin=writer.stdout, stdout=subprocess.PIPE)
    writer.stdout.close()  # only head holds the pipe's read end now
    first, _ = reader.communicate(timeout=60)
    stderr = writer.stderr.read()
    writer.wait(timeout=60)
    assert first == b"line 0\n"
    assert (writer.returncode, stderr) == (EXIT_BROKEN_PIPE, b"")


def test_text_the_locale_cannot_write_is_shown_as_a_question_mark(tmp_path):
    """Under a latin-1 locale a path with an emoji in it printed on stdout used to end the
    command in an internal error (exit 3), after its work was done."""
    config = tmp_path / "dé😀" / "slurmsched.toml"
    config.parent.mkdir()
    config.write_text(f'[daemon]\nstate_dir = "{tmp_path}"\n[slurm]\nconf = "{tmp_path / "no-slurm.conf"}"\n')
    proc = subprocess.run([sys.executable, "-m", "slurmsched", "--config", str(config), "config", "check"],
                          capture_output=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "PYTHONIOENCODING": "latin-1"})
    assert proc.returncode == 1, proc.stderr  # the check's own verdict: no Slurm, no database
    first = proc.stdout.decode("latin-1").splitlines()[0]
    assert first == f"ok   config {tmp_path}/dé?/slurmsched.toml"
