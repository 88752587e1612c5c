"""Time for the scheduling loop: the wall clock, or the simulator's clock."""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    """Time as the loop sees it: the wall clock for the daemon, simulated time in the simulator."""

    def now(self) -> float:
        """POSIX seconds."""
        ...

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` (a simulated clock just advances)."""
        ...


class SystemClock:
    """The wall clock; :meth:`sleep` returns early once ``stop`` is set (graceful shutdown).

    Args:
        stop: an event that interrupts :meth:`sleep` when set (e.g. by a SIGTERM handler).
    """

    def __init__(self, stop: threading.Event | None = None) -> None:
        self.stop = stop or threading.Event()

    def now(self) -> float:
        """``time.time()``."""
        return time.time()

    def sleep(self, seconds: float) -> None:
        """Sleep up to ``seconds``, less if :attr:`stop` gets set."""
        if seconds > 0:
            self.stop.wait(seconds)
