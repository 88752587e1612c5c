"""Simulated time: a ``Clock`` (``now()``, ``sleep()``) that only moves when told to."""

from __future__ import annotations


class SimClock:
    """The simulator's clock; satisfies the engine's ``Clock`` protocol.

    The event loop moves it to each event and cycle time with :meth:`advance_to`;
    :meth:`sleep` moves it forward without waiting, as a sleeping daemon would see it.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = float(start)

    def now(self) -> float:
        """Current simulated POSIX time."""
        return self._now

    def sleep(self, seconds: float) -> None:
        """Advance simulated time by ``seconds`` (returns at once)."""
        if seconds > 0:
            self._now += seconds

    def advance_to(self, moment: float) -> None:
        """Move to ``moment``; simulated time never goes backwards.

        Raises:
            ValueError: ``moment`` is earlier than the current time.
        """
        if moment < self._now:
            raise ValueError(f"simulated time cannot go back from {self._now} to {moment}")
        self._now = moment
