"""Wording shared by messages."""

from __future__ import annotations

from slurmsched.text import plural


def test_plural_is_singular_for_one_only():
    assert [plural(n, "job") for n in (0, 1, 2)] == ["0 jobs", "1 job", "2 jobs"]
    assert [plural(n, "batch", "batches") for n in (1, 3)] == ["1 batch", "3 batches"]
