"""slurmsched: predicts Slurm job durations from history and nudges Slurm's scheduler.

The package is flat by concern: ``model`` (typed domain data), ``gateway`` (the only
code that talks to Slurm), ``store`` (SQL history), ``predict`` (duration models),
``policy`` (pure queue ordering), ``planner``/``engine`` (one scheduling cycle),
``sim`` (trace-driven simulator over the same engine) and ``cli`` (click commands).
"""

__version__ = "0.1.0"
