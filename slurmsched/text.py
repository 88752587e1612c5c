"""Wording shared by messages."""

from __future__ import annotations


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """``count`` and ``noun``, made plural unless ``count`` is 1: ``1 job``, ``0 jobs``, ``2 jobs``.

    Args:
        count: how many.
        noun: the singular.
        nouns: the plural; ``None``: ``noun`` and an ``s``.
    """
    return f"{count} {noun if count == 1 else nouns or noun + 's'}"
