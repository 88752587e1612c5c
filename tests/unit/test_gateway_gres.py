"""GRES and TRES strings in every spelling Slurm uses."""

from __future__ import annotations

import pytest

from slurmsched.gateway.gres import gpus_from_tres, gpus_from_tres_list, gres_from_mapping, parse_gres
from slurmsched.model import GresRequest

A100_2 = GresRequest("gpu", "a100", 2)


@pytest.mark.parametrize("text, expected", [
    ("gres:gpu:a100:2", (A100_2,)),                      # 21.08-23.02 job request
    ("gres/gpu:a100:2", (A100_2,)),                      # 23.11+ job request
    ("gpu:a100:2", (A100_2,)),                           # node inventory
    ("gpu:a100:2(S:0-1)", (A100_2,)),                    # with socket binding
    ("gpu:a100:0(IDX:N/A)", (GresRequest("gpu", "a100", 0),)),  # nothing in use
    ("gres/gpu:a100=2", (A100_2,)),                      # TRES spelling
    ("gres/gpu:3", (GresRequest("gpu", None, 3),)),      # untyped count
    ("gpu:2", (GresRequest("gpu", None, 2),)),
    ("gpu", (GresRequest("gpu", None, 1),)),
    ("gpu:a100", (GresRequest("gpu", "a100", 1),)),      # type without count
    ("gpu:a100:8(IDX:0,2-3),gpu:v100:2", (GresRequest("gpu", "a100", 8), GresRequest("gpu", "v100", 2))),
    ("gres:gpu:a100:2,gres:mps:100K", (A100_2, GresRequest("mps", None, 102400))),
    ("cpu=2", ()), ("", ()), ("(null)", ()), ("N/A", ()), (None, ()),
])
def test_parse_gres(text, expected):
    assert parse_gres(text) == expected


def test_bad_gres_count_raises_value_error():
    with pytest.raises(ValueError):
        parse_gres("gpu:a100:lots")


@pytest.mark.parametrize("text, expected", [
    ("cpu=2,mem=2G,node=1,billing=2,gres/gpu=4,gres/gpu:a100=4", (4, "a100")),
    ("cpu=1,mem=1000M,node=1,billing=1,gres/gpu=3", (3, None)),
    ("cpu=4,gres/gpu=3,gres/gpu:a100=1,gres/gpu:v100=2", (3, "v100")),
    ("gres/gpu:a100=4", (4, "a100")),
    ("cpu=2,mem=2000M,node=1,billing=2", (0, None)),
    ("", (0, None)),
])
def test_gpus_from_tres_string(text, expected):
    assert gpus_from_tres(text) == expected


def test_gpus_from_accounting_tres_list():
    entries = [{"type": "cpu", "name": None, "count": 2}, {"type": "gres", "name": "gpu", "count": 4},
               {"type": "gres", "name": "gpu:a100", "count": 4}, {"type": "gres", "name": "mps", "count": 9}]
    assert gpus_from_tres_list(entries) == (4, "a100")
    assert gpus_from_tres_list([]) == (0, None) and gpus_from_tres_list(None) == (0, None)
    with pytest.raises(KeyError):
        gpus_from_tres_list([{"name": "gpu", "count": 1}])


def test_gres_from_pyslurm_mappings():
    assert gres_from_mapping({"gres/gpu:a100": 2}) == (A100_2,)
    assert gres_from_mapping({"gpu:v100": {"count": 4, "indexes": "0-3"}}) == (GresRequest("gpu", "v100", 4),)
    assert gres_from_mapping({"gpu": 1}) == (GresRequest("gpu", None, 1),)
    assert gres_from_mapping(None) == ()
