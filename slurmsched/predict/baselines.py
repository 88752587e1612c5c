"""Rule-based predictors the learned model is measured against.

* :class:`UserLimitPredictor` (``user_limit``): the user's requested time limit.
* :class:`Last2Predictor` (``last2``): mean of the user's last two run times (Tsafrir,
  Etsion and Feitelson, "Backfilling using system-generated predictions rather than
  user runtime estimates", IEEE TPDS 2007), capped at the time limit.
* :class:`HeliosPredictor` (``helios``): the history estimator of Helios' QSSF service
  (Hu et al., SC'21): the mean run time of the user's jobs with the same (or a similar)
  name, preferring those with the same GPU count, else the mean over every user's jobs
  with that name, else the user's mean, else the global mean.

All three are staged (:class:`~slurmsched.predict.protocol.StagedPredictor`): their
:meth:`prepare` already returns final predictions.
"""

from __future__ import annotations

import difflib
from typing import Iterable, Sequence

from slurmsched.model import JobRecord, Prediction
from slurmsched.predict.common import DEFAULT_ESTIMATE_S, clamp, limit_of, units
from slurmsched.predict.history import Run, RunStats, StatsTable, run_of
from slurmsched.text import plural


def close_matches(word: str, candidates: Iterable[str], n: int, cutoff: float) -> list[str]:
    """:func:`difflib.get_close_matches` ``(word, candidates, n, cutoff)``, the same list,
    computing few ratios.

    difflib computes the full :meth:`~difflib.SequenceMatcher.ratio` of every candidate
    whose two cheap upper bounds (lengths, then shared characters) pass the cutoff. The
    matching blocks behind a ratio are a common subsequence of the two strings, so
    ``2 x LCS length / total length`` bounds it too, tighter, and the LCS length costs a
    few integer operations per character (:func:`_lcs_length`). Candidates are taken by
    that bound, highest first, and the search stops once it is below the ``n``-th best
    ratio found: no later candidate can enter the list, ties included (they are broken
    by the larger string, as ``heapq.nlargest`` does in difflib). Against 100 similar
    40-character names a match costs a sixth of difflib's time (some 6 ms there).
    """
    size, masks = len(word), _position_masks(word)
    bounded = []
    for candidate in candidates:
        length = len(candidate) + size
        if not length:
            bounded.append((1.0, candidate))  # two empty strings: difflib's ratio 1.0
        elif 2.0 * min(len(candidate), size) / length >= cutoff:  # real_quick_ratio
            bound = 2.0 * _lcs_length(masks, size, candidate) / length
            if bound >= cutoff:
                bounded.append((bound, candidate))
    bounded.sort(reverse=True)
    matcher = difflib.SequenceMatcher()
    matcher.set_seq2(word)
    best: list[tuple[float, str]] = []  # the n largest (ratio, candidate) so far, largest first
    for bound, candidate in bounded:
        if len(best) == n and bound < best[-1][0]:
            break
        matcher.set_seq1(candidate)
        ratio = matcher.ratio()
        if ratio >= cutoff:
            best.append((ratio, candidate))
            best.sort(reverse=True)
            del best[n:]
    return [candidate for _, candidate in best]


def _position_masks(word: str) -> dict[str, int]:
    """For each character of ``word``, the bit set of its positions (bit i: character i)."""
    masks: dict[str, int] = {}
    for position, char in enumerate(word):
        masks[char] = masks.get(char, 0) | 1 << position
    return masks


def _lcs_length(masks: dict[str, int], size: int, text: str) -> int:
    """The length of the longest common subsequence of ``text`` and a word of ``size``
    characters whose :func:`_position_masks` are ``masks``
    (a bit-parallel recurrence: Allison and Dix, Inf. Proc. Letters 1986; this form Hyyrö, AWOCA 2004)."""
    full = (1 << size) - 1
    row = full
    for char in text:
        matched = row & masks.get(char, 0)
        row = ((row + matched) | (row - matched)) & full
    return size - row.bit_count()


class _RulePredictor:
    """Shared plumbing: a global mean, staged predict, no model to fit beyond the stats."""

    name = "rule"
    version = ""
    #: ``fit`` only rebuilds what ``update`` maintains (the evaluation need not call it).
    learns = False

    def __init__(self) -> None:
        self._reset()

    def fit(self, history: Sequence[JobRecord]) -> None:
        """Rebuild the statistics from scratch from finished jobs (ordered by end time)."""
        self._reset()
        self.update(history)

    def _reset(self) -> None:
        """Forget every statistic (subclasses add their own tables)."""
        self.overall = RunStats()

    def update(self, finished: Sequence[JobRecord]) -> None:
        """Fold newly finished jobs into the statistics (jobs that never ran are skipped)."""
        for job in finished:
            run = run_of(job)
            if run is not None:
                self.overall.add(run)
                self._add(job, run)

    def _add(self, job: JobRecord, run: Run) -> None:
        """Per-predictor statistics; the global mean is kept by :meth:`update`."""

    def _fallback(self, job: JobRecord) -> Prediction:
        """No usable history for the job: its time limit, else the global mean, else 1 h."""
        limit = limit_of(job)
        if limit is not None:
            return Prediction(job.job_id, limit, limit, limit, "no history: time limit")
        if self.overall.count:
            return self._make(job, self.overall.mean_s, f"global mean of {plural(self.overall.count, 'run')}")
        return Prediction(job.job_id, DEFAULT_ESTIMATE_S, DEFAULT_ESTIMATE_S, DEFAULT_ESTIMATE_S,
                          "cold start: no history, no time limit (default 1 h)")

    def _make(self, job: JobRecord, estimate: float, source: str) -> Prediction:
        value = clamp(estimate, limit_of(job))
        return Prediction(job.job_id, value, value, value, source, self.version)

    def predict_one(self, job: JobRecord) -> Prediction:
        """Prediction for one job from the current statistics."""
        raise NotImplementedError

    def prepare(self, jobs: Sequence[JobRecord]) -> list[object]:
        """Final predictions from the current statistics (rules need no model step)."""
        return [self.predict_one(job) for job in jobs]

    def finish(self, prepared: Sequence[object]) -> list[Prediction]:
        """The predictions :meth:`prepare` made."""
        return list(prepared)  # type: ignore[arg-type]

    def predict(self, jobs: Sequence[JobRecord], *, remember: bool = True) -> list[Prediction]:
        """One prediction per job, in order (rules remember nothing either way)."""
        return self.prepare(jobs)  # type: ignore[return-value]


class UserLimitPredictor(_RulePredictor):
    """The user's requested time limit (global mean of history when the job has none)."""

    name = "user_limit"

    def predict_one(self, job: JobRecord) -> Prediction:
        """The job's time limit, or the fallback chain when it has none."""
        return self._fallback(job)


class Last2Predictor(_RulePredictor):
    """Mean of the user's last two finished runs (by end time), capped at the time limit."""

    name = "last2"

    def _reset(self) -> None:
        super()._reset()
        self.users = StatsTable()

    def _add(self, job: JobRecord, run: Run) -> None:
        self.users.add((job.user,), run)

    def predict_one(self, job: JobRecord) -> Prediction:
        """Mean of the last two runs of the job's user; the fallback for a new user."""
        stats = self.users.get((job.user,))
        if stats is None:
            return self._fallback(job)
        return self._make(job, stats.last2_s(), f"user's last {plural(min(2, stats.count), 'run')}")


class HeliosPredictor(_RulePredictor):
    """The Helios QSSF history estimator (mean run times, fuzzy job-name matching).

    Matching follows the Helios artifact's ``NaiveEstimator``: a name seen before matches
    exactly; an unseen name is matched with :func:`difflib.get_close_matches` (at most 2
    names, cutoff 0.6). Among the user's runs with the matched name(s), those with the
    same GPU count (allocation units) are preferred; with no such runs of the user, the
    mean over every user's runs of those names is used; with no match at all, the user's
    mean, and for a new user the global mean. One deviation, for speed: fuzzy candidates
    are the user's :data:`FUZZY_CANDIDATES` most recently used names, not every name
    seen (that costs O(names) per new name: minutes on a trace with 12,000
    executables). A fuzzy match is kept until the user's candidate names change (a run
    under a name new to them), so predicting an unseen name again (each submit-cache
    rewrite, a pending job re-predicted) costs a lookup; the match itself is
    :func:`close_matches`.
    """

    name = "helios"
    MATCHES = 2
    CUTOFF = 0.6
    FUZZY_CANDIDATES = 100

    def _reset(self) -> None:
        super()._reset()
        self.users = StatsTable()
        self.user_names = StatsTable()
        self.user_name_units = StatsTable()
        self.names = StatsTable()
        self.names_of_user: dict[str, dict[str, None]] = {}
        # user -> unseen name -> its fuzzy matches among the user's current candidates
        self.fuzzy: dict[str, dict[str, list[str]]] = {}

    def _add(self, job: JobRecord, run: Run) -> None:
        user, name = job.user, job.name
        self.users.add((user,), run)
        recent = self.names_of_user.setdefault(user, {})
        if name in recent:
            del recent[name]  # to the end: the candidates stay the same
        else:
            self.fuzzy.pop(user, None)  # a new candidate (and maybe one evicted): match again
        recent[name] = None
        if len(recent) > self.FUZZY_CANDIDATES:
            del recent[next(iter(recent))]
        self.user_names.add((user, name), run)
        self.user_name_units.add((user, name, units(job)), run)
        self.names.add((name,), run)

    def _matches(self, job: JobRecord) -> list[str]:
        if (job.name,) in self.names:
            return [job.name]
        known = self.fuzzy.setdefault(job.user, {})
        found = known.get(job.name)
        if found is None:
            found = known[job.name] = close_matches(job.name, self.names_of_user.get(job.user, ()),
                                                    self.MATCHES, self.CUTOFF)
        return found

    @staticmethod
    def _mean(tables: list[RunStats | None]) -> tuple[float, int] | None:
        found = [s for s in tables if s is not None]
        count = sum(s.count for s in found)
        if not count:
            return None
        return sum(s.total_s for s in found) / count, count

    def predict_one(self, job: JobRecord) -> Prediction:
        """Mean of the best-matching history, following the Helios fallback order."""
        user = job.user
        names = self._matches(job)
        if names:
            kind = "name" if names == [job.name] else "similar name"
            same_units = self._mean([self.user_name_units.get((user, n, units(job))) for n in names])
            if same_units is not None:
                return self._make(job, same_units[0], f"user+{kind}, same size: mean of {plural(same_units[1], 'run')}")
            mine = self._mean([self.user_names.get((user, n)) for n in names])
            if mine is not None:
                return self._make(job, mine[0], f"user+{kind}: mean of {plural(mine[1], 'run')}")
            everyone = self._mean([self.names.get((n,)) for n in names])
            if everyone is not None:
                return self._make(job, everyone[0], f"{kind} (all users): mean of {plural(everyone[1], 'run')}")
        stats = self.users.get((user,))
        if stats is not None:
            return self._make(job, stats.mean_s, f"user mean of {plural(stats.count, 'run')}")
        if self.overall.count:
            return self._make(job, self.overall.mean_s, f"new user: global mean of {plural(self.overall.count, 'run')}")
        return self._fallback(job)
