"""slurmsched: predicts Slurm job durations from history and nudges Slurm's scheduler.

The package is flat by concern: ``model`` (typed domain data), ``gateway`` (the only
code that talks to Slurm), ``store`` (SQL history), ``predict`` (duration models),
``policy`` (pure queue ordering), ``planner``/``engine`` (one scheduling cycle),
``sim`` (trace-driven simulator over the same engine) and ``cli`` (click commands).
"""

__version__ = "0.1.0"

#: How slurmsched's commands (and the simulator's worker processes) format log lines.
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
