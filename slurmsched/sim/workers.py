"""Independent simulations side by side, one worker process each.

Workers are started by a ``forkserver`` (a fork of a process whose OpenMP threads have
run can hang) and receive the task once, however many items each then runs.
"""

from __future__ import annotations

import logging
import multiprocessing
import signal
import threading
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing.sharedctypes import Synchronized
from typing import Callable, Sequence, TypeVar

from tqdm import tqdm

from slurmsched import LOG_FORMAT
from slurmsched.errors import SimulationError

Item = TypeVar("Item")
Result = TypeVar("Result")
#: One simulation: an item and the terminal line of its progress bar (``None``: the default).
Task = Callable[[Item, "int | None"], Result]

_task: Callable | None = None
_line = 0


def _start(task: Callable, log_level: int, lines: Synchronized) -> None:
    global _task, _line
    _task = task
    with lines.get_lock():  # each worker draws its progress bars on a terminal line of its own
        _line = lines.value
        lines.value += 1
    logging.basicConfig(level=log_level, format=LOG_FORMAT)  # on stderr, as the command's own log
    # tqdm would make a multiprocessing lock (a named semaphore) for its bars, which a
    # killed worker leaves behind for the resource tracker to warn about
    tqdm.set_lock(threading.RLock())
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # an idle worker waits for the parent to stop it


def _run(item: object) -> object:
    if _task is None:
        raise RuntimeError("simulation worker started without its task")
    signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C ends a run with KeyboardInterrupt
    try:
        return _task(item, _line)
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def run_side_by_side(task: Task[Item, Result], items: Sequence[Item], workers: int) -> list[Result]:
    """``task(item, line)`` for every item, in order: in-process, or on up to ``workers`` processes.

    ``task`` must pickle (a module-level function, or a method of a picklable object).
    The workers log as this process does. Ctrl-C at the terminal reaches the workers
    too: their runs end, the items not started are cancelled, and the call stops.

    Raises:
        SimulationError: worker processes cannot be started, or one died (killed, or
            out of memory).
    """
    workers = min(workers, len(items))
    if workers <= 1:
        return [task(item, None) for item in items]
    context = multiprocessing.get_context("forkserver")
    try:
        pool = ProcessPoolExecutor(workers, mp_context=context, initializer=_start,
                                   initargs=(task, logging.getLogger().level, context.Value("i", 0)))
    except OSError as exc:  # no POSIX semaphores (e.g. no /dev/shm in a container)
        raise SimulationError(f"cannot start simulation worker processes ({exc.strerror or exc}); "
                              "use --workers 1") from None
    with pool:
        futures = [pool.submit(_run, item) for item in items]
        try:
            return [future.result() for future in futures]  # type: ignore[misc]
        except BrokenProcessPool:
            raise SimulationError(f"a simulation worker process died (killed, or out of memory: each of the "
                                  f"{workers} workers holds its own copy of the workload; try fewer --workers)"
                                  ) from None
        except BaseException:
            pool.shutdown(cancel_futures=True)
            raise
