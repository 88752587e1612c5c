"""Predictors on small generated histories: cold start, names, pathological values, persistence."""

from __future__ import annotations

import difflib
import math
import pickle
import random
from dataclasses import replace

import pytest
import sklearn

from slurmsched.errors import ConfigError
from slurmsched.model import JobRecord, JobState
from slurmsched.predict.baselines import _lcs_length, _position_masks, close_matches
from slurmsched.predict.evaluate import evaluate
from slurmsched.predict.features import CategoryCodes, replay
from slurmsched.predict.gbm import FORMAT, MIN_TRAIN_JOBS, ModelFormatError, SlurmschedPredictor
from slurmsched.predict.history import run_of
from slurmsched.predict.registry import PREDICTORS, make_predictor
from slurmsched.predict.schedule import RefitSchedule

NAMES = tuple(PREDICTORS)


def job(job_id: int, user: str, name: str, runtime: float | None, submit: float, limit: int | None = 3600,
        gpus: int = 1, state: JobState = JobState.COMPLETED) -> JobRecord:
    start = None if runtime is None else submit
    end = None if runtime is None else submit + runtime
    return JobRecord(job_id=job_id, user=user, name=name, submit_time=submit, start_time=start, end_time=end,
                     time_limit_s=limit, gpus=gpus, state=state)


def workload(n: int, seed: int = 1) -> list[JobRecord]:
    """Users re-running a few named jobs whose run times repeat with some noise."""
    rng = random.Random(seed)
    projects = {(f"u{u}", f"train-{p}"): rng.choice([60, 300, 1800, 7200]) for u in range(8) for p in range(3)}
    keys = sorted(projects)
    jobs = []
    for i in range(n):
        user, name = keys[rng.randrange(len(keys))]
        base = projects[(user, name)]
        runtime = base if rng.random() < 0.6 else base * rng.uniform(0.3, 1.5)
        jobs.append(job(i + 1, user, name, round(runtime), submit=i * 600.0, limit=4 * 7200))
    return jobs


@pytest.mark.parametrize("name", NAMES)
def test_empty_history_and_cold_start(name: str) -> None:
    predictor = make_predictor(name)
    predictor.fit([])
    with_limit, without = predictor.predict([job(1, "new", "x", None, 0.0, limit=900),
                                             job(2, "new", "x", None, 0.0, limit=None)])
    assert with_limit.estimate_s == 900 and "limit" in with_limit.source
    assert without.estimate_s == 3600 and "default" in without.source
    for p in (with_limit, without):
        assert 0 < p.low_s <= p.estimate_s <= p.high_s


@pytest.mark.parametrize("name", NAMES)
def test_pathological_values_never_raise(name: str) -> None:
    history = [job(1, "a", "z", 0, 0.0), job(2, "a", "z", 0, 10.0, limit=None),
               job(3, "a", "long", 5000, 20.0, limit=600, state=JobState.TIMEOUT),
               job(4, "a", "never-ran", None, 30.0, state=JobState.CANCELLED),
               job(5, "b", "", 100, 40.0, limit=0, gpus=0)]
    predictor = make_predictor(name)
    predictor.fit(history)
    predictor.update([job(6, "a", "z", 0, 50.0)])
    out = predictor.predict([job(10, "a", "z", None, 100.0), job(11, "a", "long", None, 100.0, limit=600),
                             job(12, "b", "", None, 100.0, limit=None, gpus=0), job(13, "c", "q", None, 100.0,
                                                                                     limit=-5),
                             replace(job(14, "a", "z", None, 100.0), memory_mb=-4000),
                             job(15, "a", "z", None, math.nan), job(16, "b", "y", None, -math.inf)])
    assert [p.job_id for p in out] == [10, 11, 12, 13, 14, 15, 16]
    for p in out:
        assert all(math.isfinite(v) and v >= 1 for v in (p.low_s, p.estimate_s, p.high_s))
        assert p.low_s <= p.estimate_s <= p.high_s and p.source
    assert out[1].estimate_s <= 600 and out[1].high_s <= 600  # never past the time limit


def test_identical_names_across_users_are_kept_apart() -> None:
    history = []
    for i in range(150):
        history.append(job(2 * i + 1, "alice", "train", 100, i * 1000.0))
        history.append(job(2 * i + 2, "bob", "train", 10000, i * 1000.0, limit=20000))
    for name in ("slurmsched", "helios", "last2"):
        predictor = make_predictor(name)
        predictor.fit(history)
        alice, bob = predictor.predict([job(900, "alice", "train", None, 1e6),
                                        job(901, "bob", "train", None, 1e6, limit=20000)])
        assert alice.estimate_s == pytest.approx(100, rel=0.01), name
        assert bob.estimate_s == pytest.approx(10000, rel=0.01), name


def test_a_script_run_with_another_memory_request_keeps_its_own_history() -> None:
    """The same user and name asking for other memory per CPU is another kind of work (``kind``):
    its own runs, not the other kind's, are the user+name+mem expert's."""
    history = []
    for i in range(MIN_TRAIN_JOBS // 2 + 50):
        for offset, memory, runtime in ((0, 4000, 120.0), (1, 64000, 7200.0)):
            history.append(replace(job(2 * i + offset + 1, "alice", "align", runtime, i * 1000.0, limit=20000),
                                   cpus=4, memory_mb=memory))
    predictor = SlurmschedPredictor()
    predictor.fit(history)
    small, big, other_cpus, new = predictor.predict([
        replace(job(9001, "alice", "align", None, 1e6, limit=20000), cpus=4, memory_mb=4000),
        replace(job(9002, "alice", "align", None, 1e6, limit=20000), cpus=4, memory_mb=64000),
        replace(job(9003, "alice", "align", None, 1e6, limit=20000), cpus=8, memory_mb=128000),
        replace(job(9004, "alice", "align", None, 1e6, limit=20000), cpus=4, memory_mb=2000)])
    assert small.estimate_s == pytest.approx(120, rel=0.01) and "user+name+mem" in small.source
    assert big.estimate_s == pytest.approx(7200, rel=0.01) and "user+name+mem" in big.source
    assert other_cpus.estimate_s == pytest.approx(7200, rel=0.01)  # 16,000 MB per CPU, as the big one
    assert "user+name+mem" not in new.source  # a memory request never seen: no such history


def test_new_name_of_known_user_and_new_user_say_so() -> None:
    predictor = SlurmschedPredictor()
    predictor.fit(workload(MIN_TRAIN_JOBS + 100))
    assert predictor.version.startswith("gbm-")
    known, new_name, new_user = predictor.predict([job(1, "u1", "train-0", None, 1e7),
                                                   job(2, "u1", "brand-new", None, 1e7),
                                                   job(3, "stranger", "x", None, 1e7)])
    assert "user+name" in known.source and predictor.version in known.source
    assert "user+name" not in new_name.source and "user" in new_name.source
    assert "cold start" in new_user.source and new_user.estimate_s <= 4 * 7200


def test_update_moves_estimates_between_refits() -> None:
    predictor = SlurmschedPredictor()
    predictor.fit(workload(MIN_TRAIN_JOBS + 50))
    version = predictor.version
    predictor.update([job(5000, "u3", "fresh", 4321, 1e7, limit=86400)])
    (p,) = predictor.predict([job(5001, "u3", "fresh", None, 1e7 + 5000, limit=86400)])
    assert p.estimate_s == 4321 and predictor.version == version


def test_round_trip_and_corrupt_blob() -> None:
    predictor = SlurmschedPredictor()
    predictor.fit(workload(MIN_TRAIN_JOBS + 50))
    pending = [job(1, "u2", "train-1", None, 1e7), job(2, "zz", "q", None, 1e7, limit=None)]
    restored = SlurmschedPredictor.from_bytes(predictor.to_bytes())
    assert restored.version == predictor.version
    assert restored.predict(pending) == predictor.predict(pending)
    with pytest.raises(ModelFormatError, match="unreadable"):
        SlurmschedPredictor.from_bytes(b"not a model")


def test_unknown_predictor_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"daemon.predictor must be one of slurmsched, .* \(got 'nope'\)"):
        make_predictor("nope")


def test_refit_schedule() -> None:
    schedule = RefitSchedule(min_jobs=10, min_new_jobs=5, growth=0.5, interval_s=100.0)
    assert not schedule.due(9, None, 0.0, None) and schedule.due(10, None, 0.0, None)
    assert not schedule.due(14, 10, 1000.0, 0.0)          # too few new jobs, whatever the time
    assert schedule.due(15, 10, 1.0, 0.0)                 # grew by half
    assert not schedule.due(26, 20, 50.0, 0.0) and schedule.due(26, 20, 100.0, 0.0)  # interval
    # Only the interval moves with time alone: it is when a refit falls due with no new jobs.
    assert schedule.next_due(26, 20, 7.0) == 107.0
    assert schedule.next_due(24, 20, 7.0) == math.inf      # too few new jobs: only more can make it due
    assert schedule.next_due(26, None, None) == math.inf   # the first fit waits for jobs, not time
    assert RefitSchedule(interval_s=None).next_due(10_000, 0, 7.0) == math.inf


def test_online_evaluation_beats_last2_on_repeating_work() -> None:
    result = evaluate(workload(1500), [make_predictor(n) for n in ("slurmsched", "last2", "helios")],
                      schedule=RefitSchedule(min_jobs=200, min_new_jobs=200, growth=0.5, interval_s=None))
    assert result.jobs == 1500 and result.refits >= 2
    scores = {r.name: r.accuracy for r in result.results}
    assert scores["slurmsched"].median_abs_log2_error < scores["last2"].median_abs_log2_error
    assert scores["slurmsched"].within_50pct > scores["last2"].within_50pct
    assert 0.5 < scores["slurmsched"].spread_coverage <= 1.0


@pytest.mark.parametrize(("name", "source"), [("helios", "user+name, same size: mean of 1 run"),
                                              ("last2", "user's last 1 run")])
def test_a_source_counts_one_run_in_the_singular(name: str, source: str) -> None:
    predictor = make_predictor(name)
    predictor.fit([job(1, "alice", "train", 600, 0.0)])
    (prediction,) = predictor.predict([job(2, "alice", "train", None, 1e4)])
    assert prediction.source == source


@pytest.mark.parametrize(("limit", "hit"), [(600, True), (6000, False), (None, False), (0, False), (-5, False)])
def test_only_a_real_time_limit_can_be_hit(limit: int | None, hit: bool) -> None:
    """A negative limit is no limit (``limit_of``), so no run hits it (the hit-rate columns)."""
    run = run_of(job(1, "a", "z", 600, 0.0, limit=limit))
    assert run is not None and run.hit is hit


def test_a_run_that_ends_before_its_submit_does_not_hold_back_the_replay() -> None:
    """A record ending before it was submitted (clock skew, an odd accounting row) is folded once
    it is submitted; the runs ending after it are folded when they end, not after it."""
    history = [job(i + 1, "alice", "train", 100, i * 1000.0) for i in range(20)]
    history.append(replace(job(99, "bob", "odd", 100, 50_000.0), start_time=50_000.0, end_time=10.0))
    codes = CategoryCodes(history)
    _, snapshots, _ = replay(history, codes, len(history))
    assert [s.chosen >= 0 for s in snapshots[:20]] == [False] + [True] * 19  # alice's last run, from her 2nd job


@pytest.mark.parametrize("state", [None, {"version": "gbm-x"}])
def test_a_blob_of_this_layout_without_the_whole_state_is_a_format_error(state: object) -> None:
    """Not a KeyError, or an AttributeError at the first predict (the daemon catches ModelFormatError)."""
    blob = pickle.dumps({"format": FORMAT, "sklearn": sklearn.__version__, "state": state})
    with pytest.raises(ModelFormatError, match="incomplete"):
        SlurmschedPredictor.from_bytes(blob)


def test_a_model_that_learned_through_update_codes_partitions_when_fitted() -> None:
    """Each job by a new user: only the cold-start model answers, and only the partition tells
    short work from long. Fed through ``update`` (as the online evaluation, the simulator and a
    daemon started on little history do), the fit codes the partitions as a fresh fit does."""
    history = []
    for i in range(MIN_TRAIN_JOBS + 200):
        partition, runtime = ("short", 60.0) if i % 2 else ("long", 20000.0)
        history.append(replace(job(i + 1, f"user{i}", "run", runtime, i * 100.0, limit=86400), partition=partition))
    history.sort(key=lambda j: (j.end_time, j.job_id))
    online = SlurmschedPredictor()
    online.predict(history)  # each predicted while pending (rows kept when it finishes)
    online.update(history)
    online.fit(history)
    fresh = SlurmschedPredictor()
    fresh.fit(history)
    assert online.state.codes.codes["partition"] == fresh.state.codes.codes["partition"] != {}
    probes = [replace(job(9001, "newcomer", "run", None, 1e6, limit=86400), partition=p) for p in ("short", "long")]
    short, long = online.predict(probes)
    assert short.estimate_s < 600 and long.estimate_s > 5000
    assert online.predict(probes) == fresh.predict(probes)


def test_helios_remembered_fuzzy_matches_follow_the_users_names() -> None:
    """An unseen name's fuzzy matches are remembered until the user's candidate names
    change: after each batch of finished jobs (new names, reruns, evictions past a small
    candidate limit) every prediction equals a predictor fitted afresh on that history."""
    rng = random.Random(7)
    stems = ["train-resnet", "train-resnat", "eval-bert", "eval-berts", "prep"]
    live = make_predictor("helios")
    live.FUZZY_CANDIDATES = 4
    history: list[JobRecord] = []
    matched = 0
    for step in range(60):
        batch = [job(len(history) + i + 1, rng.choice("ab"), f"{rng.choice(stems)}-{rng.randrange(6)}",
                     rng.randrange(60, 6000), submit=float(step)) for i in range(rng.randrange(3))]
        history += batch
        live.update(batch)
        fresh = make_predictor("helios")
        fresh.FUZZY_CANDIDATES = 4
        fresh.fit(history)
        probes = [job(10_000 + i, user, f"{stem}-{rng.randrange(6, 9)}", None, float(step))
                  for i, (user, stem) in enumerate((u, s) for u in "ab" for s in stems)]
        got = live.predict(probes)
        assert got == fresh.predict(probes)
        matched += sum("similar name" in p.source for p in got)
    assert matched > 100  # the fuzzy path is exercised, not the fallbacks alone


@pytest.mark.parametrize("n", [1, 2, 3])
def test_close_matches_are_difflibs(n: int) -> None:
    """The same list as difflib's, ties included: short names from a few letters tie often
    (equal ratios, broken by the larger name), and duplicates and empty names occur."""
    rng = random.Random(n)
    ties = 0
    for _ in range(400):
        letters = rng.choice(["ab", "abc", "abcdef", "sst-0123456789"])
        word = "".join(rng.choices(letters, k=rng.randrange(0, 12)))
        candidates = ["".join(rng.choices(letters, k=rng.randrange(0, 12))) for _ in range(rng.randrange(0, 30))]
        cutoff = rng.choice([0.0, 0.3, 0.6, 0.9, 1.0])
        expected = difflib.get_close_matches(word, candidates, n=n, cutoff=cutoff)
        assert close_matches(word, candidates, n, cutoff) == expected, (word, candidates, cutoff)
        ratios = [difflib.SequenceMatcher(None, c, word).ratio() for c in set(candidates)]
        ties += len(expected) == n and ratios.count(difflib.SequenceMatcher(None, expected[-1], word).ratio()) > 1
    assert ties > 20  # the tie-breaking is exercised


def test_lcs_length_is_the_dynamic_programs() -> None:
    rng = random.Random(5)
    for _ in range(2000):
        letters = rng.choice(["ab", "abc", "abcdefgh", "é?x-"])
        a, b = ("".join(rng.choices(letters, k=rng.randrange(0, 16))) for _ in range(2))
        table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
        for i, x in enumerate(a):
            for j, y in enumerate(b):
                table[i + 1][j + 1] = table[i][j] + 1 if x == y else max(table[i][j + 1], table[i + 1][j])
        assert _lcs_length(_position_masks(b), len(b), a) == table[-1][-1], (a, b)
