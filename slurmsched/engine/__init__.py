"""The engine: one scheduling cycle with every dependency injected (daemon and simulator)."""

from slurmsched.engine.clock import Clock, SystemClock
from slurmsched.engine.cycle import CycleReport, Engine

__all__ = ["Clock", "CycleReport", "Engine", "SystemClock"]
