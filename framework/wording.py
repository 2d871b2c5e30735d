"""Counted nouns for messages people read: ``1 partition``, ``2 partitions``."""

from __future__ import annotations

__all__ = ["counted"]


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``count`` and ``noun``, plural unless ``count`` is 1.

    >>> counted(1, "partition"), counted(3, "partition"), counted(2, "crash", "crashes")
    ('1 partition', '3 partitions', '2 crashes')
    """
    return f"{count:,} {noun if count == 1 else plural or noun + 's'}"
