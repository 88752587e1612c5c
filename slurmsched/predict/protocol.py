"""The :class:`Predictor` protocol every duration predictor implements."""

from __future__ import annotations

from typing import Protocol, Sequence

from slurmsched.model import JobRecord, Prediction


class Predictor(Protocol):
    """Predicts run times of jobs from the history of finished jobs.

    Implementations are pure: they see only :class:`JobRecord` values and never import
    the gateway, store, simulator or daemon. ``version`` identifies the fitted state
    (recorded with every prediction and in the model registry).
    """

    name: str
    version: str

    def fit(self, history: Sequence[JobRecord]) -> None:
        """(Re)build the model from finished jobs (ordered by end time)."""
        ...

    def update(self, finished: Sequence[JobRecord]) -> None:
        """Fold newly finished jobs into the cheap per-user/per-name statistics (every cycle)."""
        ...

    def predict(self, jobs: Sequence[JobRecord], *, remember: bool = True) -> list[Prediction]:
        """One prediction per job, in order; never raises for odd or missing fields.

        ``remember=False`` marks the jobs as hypothetical (the submit cache's probes: the
        next job of a (user, job name)): a predictor that learns from the jobs it
        predicted, when they finish, keeps no trace of these.
        """
        ...


class StagedPredictor(Predictor, Protocol):
    """A predictor whose :meth:`predict` splits into a cheap, history-dependent step and
    a model step that can be batched.

    ``predict(jobs) == finish(prepare(jobs))``. :meth:`prepare` reads the history
    statistics as they are *now* (so later :meth:`update` calls do not change the
    result); :meth:`finish` applies the fitted model to many prepared jobs at once and
    must be called before the next :meth:`fit`. The online evaluation uses this to
    predict every job as of its own submit time while running the model once per refit.

    Attributes:
        learns: ``False`` when :meth:`fit` only rebuilds what :meth:`update` maintains
            (rules), so a caller that already fed every finished job to ``update`` need
            not call ``fit``.
    """

    learns: bool

    def prepare(self, jobs: Sequence[JobRecord]) -> list[object]:
        """Capture what predicting each job needs from the current history (opaque values)."""
        ...

    def finish(self, prepared: Sequence[object]) -> list[Prediction]:
        """Predictions for values returned by :meth:`prepare`, in order."""
        ...
