"""Typed, one-line errors from real Slurm client commands (no daemons needed).

An unreachable slurmctld/slurmdbd is a slurm.conf whose ports are closed; a hung one is
a socket that accepts and never answers; a missing command is an empty bin_dir.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from slurmsched.errors import SlurmCommandFailed, SlurmCommandNotFound, SlurmUnavailable
from slurmsched.gateway import CliGateway
from slurmsched.model import SetFeatures, SetSiteFactor

pytestmark = pytest.mark.skipif(shutil.which("scontrol") is None,
                                reason="Slurm client commands (slurm-client) are not installed")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def write_conf(directory: Path, ctld_port: int, *, dbd_port: int | None = None, timeout: int = 1) -> str:
    lines = ["ClusterName=closed", "SlurmctldHost=localhost(127.0.0.1)", f"SlurmctldPort={ctld_port}",
             "AuthType=auth/none", f"MessageTimeout={timeout}",
             "NodeName=n1 CPUs=1 State=UNKNOWN", "PartitionName=p Nodes=n1 Default=YES"]
    if dbd_port is not None:
        lines += ["AccountingStorageType=accounting_storage/slurmdbd", "AccountingStorageHost=127.0.0.1",
                  f"AccountingStoragePort={dbd_port}"]
    path = directory / "slurm.conf"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


@pytest.fixture
def closed_conf(tmp_path: Path) -> str:
    return write_conf(tmp_path, free_port(), dbd_port=free_port())


def one_line(err: pytest.ExceptionInfo) -> str:
    message = str(err.value)
    assert message and "\n" not in message
    return message


def test_unreachable_controller_is_slurm_unavailable(closed_conf):
    gateway = CliGateway(slurm_conf=closed_conf, timeout_s=20)
    with pytest.raises(SlurmUnavailable) as err:
        gateway.snapshot()
    assert "Unable to contact slurm controller" in one_line(err)
    with pytest.raises(SlurmUnavailable):
        gateway.scheduler_config()


def test_unreachable_slurmdbd_is_slurm_unavailable(closed_conf):
    with pytest.raises(SlurmUnavailable) as err:
        CliGateway(slurm_conf=closed_conf).finished_since(0)
    assert "Connection refused" in one_line(err)
    assert one_line(err).startswith("sacct: ") and "sacct: sacct" not in one_line(err)  # named once


def test_apply_to_an_unreachable_controller_fails_each_action_without_raising(closed_conf):
    actions = [SetSiteFactor(1, 10), SetSiteFactor(2, 10), SetFeatures(3, "a100"), SetFeatures(4, "bad name")]
    outcomes = CliGateway(slurm_conf=closed_conf).apply(actions)
    assert [o.action for o in outcomes] == actions
    assert not any(o.ok for o in outcomes)
    # 22.05's scontrol update says "Unexpected message received for job N" here: Slurm's own text is kept
    assert all(o.message and "\n" not in o.message for o in outcomes[:3])
    assert "characters" in outcomes[3].message  # refused before Slurm was asked


def test_accounting_disabled_is_a_command_failure(tmp_path):
    conf = write_conf(tmp_path, free_port())
    with pytest.raises(SlurmCommandFailed) as err:
        CliGateway(slurm_conf=conf).finished_since(0)
    assert "accounting storage is disabled" in one_line(err)


def test_a_controller_that_never_answers_times_out(tmp_path):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    accepted = []
    stop = threading.Event()

    def accept_and_hold() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept_and_hold, daemon=True)
    thread.start()
    try:
        conf = write_conf(tmp_path, server.getsockname()[1], timeout=30)
        with pytest.raises(SlurmUnavailable) as err:
            CliGateway(slurm_conf=conf, timeout_s=1).scheduler_config()
        assert one_line(err) == "scontrol did not answer within 1 s (slurmctld down or overloaded?)"
    finally:
        stop.set()
        thread.join()
        for conn in accepted:
            conn.close()
        server.close()


def test_a_timeout_reports_what_the_command_said_on_stderr(tmp_path):
    # scontrol retries an unreadable slurm.conf for 60 s; only its stderr says why
    missing = tmp_path / "nonexist.conf"
    with pytest.raises(SlurmUnavailable) as err:
        CliGateway(slurm_conf=str(missing), timeout_s=2).scheduler_config()
    message = one_line(err)
    assert message.startswith("scontrol did not answer within 2 s and said: "), message
    assert f"cannot stat file {missing}: No such file or directory" in message


def test_queue_with_a_missing_slurm_conf_names_it_without_waiting(tmp_path):
    missing = tmp_path / "x" / "nonexist.conf"
    env = {**os.environ, "SLURMSCHED_SLURM_CONF": str(missing), "SLURMSCHED_SLURM_TIMEOUT_S": "5",
           "SLURMSCHED_CONFIG": os.devnull}
    proc = subprocess.run([sys.executable, "-m", "slurmsched", "queue"], capture_output=True, text=True,
                          env=env, timeout=60, check=False)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == f"error: slurm.conf: {missing} does not exist\n"


def test_offline_commands_run_without_the_configured_slurm_conf(tmp_path):
    """A laptop with a copy of the site's config but no slurm.conf can still simulate a trace."""
    trace = tmp_path / "t.swf"
    trace.write_text("".join(f"{i} {i * 100} 0 {300 + i} 4 -1 -1 4 1200 -1 1 1 -1 -1 -1 -1 -1 -1\n"
                             for i in range(1, 30)))
    env = {**os.environ, "SLURMSCHED_SLURM_CONF": str(tmp_path / "nonexist.conf"), "SLURMSCHED_CONFIG": os.devnull}
    proc = subprocess.run([sys.executable, "-m", "slurmsched", "simulate", "--trace", str(trace), "--format", "swf",
                           "--gpus", "8", "--policy", "fifo", "--json", "--no-progress"],
                          capture_output=True, text=True, env=env, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["jobs"] == 29


def test_missing_binaries_are_command_not_found(tmp_path, closed_conf):
    empty = tmp_path / "bin"
    empty.mkdir()
    with pytest.raises(SlurmCommandNotFound) as err:
        CliGateway(slurm_conf=closed_conf, bin_dir=str(empty)).snapshot()
    assert one_line(err) == f"scontrol not found in {empty} (is slurm-client installed?)"
    outcome, = CliGateway(bin_dir=str(empty)).apply([SetSiteFactor(1, 5)])
    assert not outcome.ok and "scontrol not found" in outcome.message


def test_queue_command_prints_one_error_line_and_exits_2(closed_conf):
    env = {**os.environ, "SLURMSCHED_SLURM_CONF": closed_conf, "SLURMSCHED_CONFIG": os.devnull}
    proc = subprocess.run([sys.executable, "-m", "slurmsched", "queue"], capture_output=True, text=True,
                          env=env, timeout=60, check=False)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.startswith("error: scontrol: ") and proc.stderr.count("\n") == 1
    assert "Traceback" not in proc.stderr
