"""The submit cache file: exact format, atomic replacement, clean failures."""

from __future__ import annotations

import os

import pytest

from slurmsched.config import PlannerSection
from slurmsched.errors import StoreError
from slurmsched.model import SchedulerConfig
from slurmsched.planner import SiteFactorScale
from slurmsched.submit_cache import (MAX_SERVICE_S, SubmitCache, SubmitEstimate, levels_for,
                                     read_submit_cache, render, write_submit_cache)

SCALE = SiteFactorScale.build(PlannerSection(), SchedulerConfig(weight_age=10000, weight_fairshare=10000))


def _cache(**kw) -> SubmitCache:
    base = dict(written_at=1_700_000_000, max_age_s=600, cpu_weight=0.25, levels=levels_for(SCALE),
                estimates=(SubmitEstimate("alice", "train resnet", 3600), SubmitEstimate("bob", "eval", 60)))
    return SubmitCache(**{**base, **kw})


@pytest.mark.parametrize("planner", [PlannerSection(), PlannerSection(mode="blend", level_ratio=1.5),
                                     PlannerSection(min_service_gpu_h=0.001, max_service_gpu_h=7.0)])
def test_levels_give_exactly_the_planners_site_factor(planner):
    scale = SiteFactorScale.build(planner, SchedulerConfig(weight_age=1000, weight_fairshare=5000))
    levels = levels_for(scale)
    bounds = [b for b, _ in levels]
    assert bounds == sorted(set(bounds)) and bounds[-1] == MAX_SERVICE_S
    services = {1, 2, MAX_SERVICE_S} | {b + d for b, _ in levels[:-1] for d in (-1, 0, 1)}
    for service in sorted(services):
        assert next(v for b, v in levels if service <= b) == scale.site_factor(service), service


def test_render_exact_format_and_round_trip(tmp_path):
    cache = _cache(levels=((100, 900), (MAX_SERVICE_S, 100)))
    assert render(cache) == ("slurmsched-submit-cache 1\nwritten 1700000000\nmax_age 600\ncpu_weight 0.25\n"
                             f"level 100 900\nlevel {MAX_SERVICE_S} 100\n"
                             "job 3600\talice\ttrain resnet\njob 60\tbob\teval\n")
    path = tmp_path / "c"
    write_submit_cache(path, cache)
    assert read_submit_cache(path) == cache
    assert oct(os.stat(path).st_mode & 0o777) == "0o644"


def test_names_with_tabs_or_newlines_are_left_out(tmp_path):
    cache = _cache(estimates=(SubmitEstimate("a", "x\ty", 5), SubmitEstimate("b", "line\nbreak", 5),
                              SubmitEstimate("c", "ok", 5)))
    write_submit_cache(tmp_path / "c", cache)
    assert read_submit_cache(tmp_path / "c").estimates == (SubmitEstimate("c", "ok", 5),)


def test_replace_is_atomic_and_leaves_no_temporary_files(tmp_path):
    path = tmp_path / "c"
    write_submit_cache(path, _cache())
    inode = os.stat(path).st_ino
    write_submit_cache(path, _cache(written_at=1_700_000_100))
    assert os.stat(path).st_ino != inode            # a new file renamed over the old one
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c"]
    assert read_submit_cache(path).written_at == 1_700_000_100


def test_missing_directory_and_bad_files_raise_store_error(tmp_path):
    with pytest.raises(StoreError, match="cannot write submit cache"):
        write_submit_cache(tmp_path / "no" / "c", _cache())
    assert read_submit_cache(tmp_path / "absent") is None
    (tmp_path / "junk").write_text("hello\n")
    with pytest.raises(StoreError, match="not a slurmsched cache"):
        read_submit_cache(tmp_path / "junk")
    (tmp_path / "bad").write_text("slurmsched-submit-cache 1\nwritten 1\nmax_age 5\nlevel x y\n")
    with pytest.raises(StoreError, match="line 4 is malformed"):
        read_submit_cache(tmp_path / "bad")
