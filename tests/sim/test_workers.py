"""run_side_by_side: the same results in order, in-process or in worker processes."""

from __future__ import annotations

import os
import signal

import pytest

from slurmsched.errors import SimulationError
from slurmsched.sim.workers import run_side_by_side


def _square(item: int, line: int | None) -> tuple[int, int | None, int]:
    return item * item, line, os.getpid()


def _killed(item: int, line: int | None) -> None:
    os.kill(os.getpid(), signal.SIGKILL)  # as the kernel's OOM killer would


def test_results_come_in_order_in_process_or_from_workers() -> None:
    assert run_side_by_side(_square, [1, 2, 3], 1) == [(1, None, os.getpid()), (4, None, os.getpid()),
                                                      (9, None, os.getpid())]
    results = run_side_by_side(_square, [1, 2, 3, 4, 5], 2)
    assert [r[0] for r in results] == [1, 4, 9, 16, 25]
    assert os.getpid() not in {r[2] for r in results}
    assert {r[1] for r in results} <= {0, 1}  # one progress-bar line per worker
    assert run_side_by_side(_square, [], 4) == []


def test_a_worker_that_dies_is_a_clear_error() -> None:
    with pytest.raises(SimulationError, match="worker process died.*fewer --workers"):
        run_side_by_side(_killed, [1, 2], 2)
