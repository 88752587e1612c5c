"""``history import`` reads its input (the trace, or accounting) before it creates or migrates the database."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest
from sqlalchemy import make_url

from slurmsched.store.repository import SqlJobRepository


def _no_schema(db_url: str) -> bool:
    """Whether the database was left as the test got it: no SQLite file, or no tables."""
    if make_url(db_url).get_backend_name() == "sqlite":
        return not Path(make_url(db_url).database or "").exists()
    repo = SqlJobRepository.from_url(db_url)
    try:
        return repo.schema_revision() is None
    finally:
        repo.close()


def test_a_mistyped_trace_path_creates_no_database(tmp_path: Path, cli, db_url: str) -> None:
    missing = tmp_path / "HPC2N-2002.swf.gz"
    result = cli("history", "import", "--trace", str(missing), "--format", "swf", "--db", db_url)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == f"error: cannot read trace {missing}: No such file or directory (nothing was imported)\n"
    assert _no_schema(db_url)


def test_a_missing_archive_member_creates_no_database(tmp_path: Path, cli, db_url: str) -> None:
    archive = tmp_path / "itp.tar.gz"
    result = cli("history", "import", "--trace", f"{archive}:cluster04.csv", "--format", "itp", "--db", db_url)
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: cannot read tar archive {archive}: ") and result.stderr.count("\n") == 1
    assert _no_schema(db_url)


def test_the_default_state_dir_is_not_made_for_a_trace_that_cannot_be_read(tmp_path: Path, cli) -> None:
    state = tmp_path / "state"
    csv = tmp_path / "jobs.csv.gz"
    with gzip.open(csv, "wt") as out:
        out.write("not,the,helios,columns\n1,2,3,4\n")
    result = cli("history", "import", "--trace", str(csv), "--format", "helios",
                 env={"SLURMSCHED_DAEMON_STATE_DIR": str(state)})
    assert result.returncode == 2 and str(csv) in result.stderr and "(nothing was imported)" in result.stderr
    assert not state.exists()


@pytest.mark.parametrize("slurm", ["no-sacct", "slurmdbd-down"])
def test_accounting_that_cannot_be_read_creates_no_database(tmp_path: Path, cli, db_url: str, slurm: str) -> None:
    if slurm == "no-sacct":
        env = {"SLURMSCHED_SLURM_BIN_DIR": str(tmp_path / "no-slurm")}
        expected = f"error: sacct not found in {tmp_path / 'no-slurm'} (is slurm-client installed?)"
    else:
        if shutil.which("sacct") is None:
            pytest.skip("Slurm client commands (slurm-client) are not installed")
        conf = tmp_path / "slurm.conf"  # a real sacct, refused by a slurmdbd port nothing listens on
        conf.write_text("ClusterName=down\nSlurmctldHost=localhost\n"
                        "AccountingStorageType=accounting_storage/slurmdbd\nAccountingStoragePort=1\n")
        env = {"SLURMSCHED_SLURM_CONF": str(conf)}
        expected = "Connection refused"
    result = cli("history", "import", "--from-sacct", "--since", "1d", "--db", db_url, env=env)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("error: sacct") and result.stderr.count("\n") == 1 and expected in result.stderr
    assert result.stderr.endswith(" (nothing was imported)\n")
    assert _no_schema(db_url)
