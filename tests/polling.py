"""Polling for the live tests: wait until the real cluster shows what a test expects."""

from __future__ import annotations

import time
from typing import Callable, TypeVar

T = TypeVar("T")


def wait_until(what: str, predicate: Callable[[], T], timeout: float, interval: float = 1.0) -> T:
    """Call ``predicate()`` every ``interval`` seconds until it returns something truthy; return that.

    Raises:
        AssertionError: naming ``what`` (and the last value) after ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last: {value!r})")
        time.sleep(interval)
