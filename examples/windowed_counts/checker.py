"""The windowed counts' exact expected output, as a pure function of the page views.

This is the specification the job is checked against (and the one the Spark verifier
implements). Watermark records and arrival order play no part: they decide *when* a
window is emitted, never *what* it holds.

Input: page views ``{"user": str, "ts": int, …}``. Output: ``(user, start)`` → the number
of views of ``user`` with ``start <= ts < start + size_ms``, for every window start that
is a multiple of ``advance_ms`` (windows starting before 0 are left out) and holds at
least one view.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["expected"]


def expected(views: Iterable[Mapping[str, Any]], size_ms: int, advance_ms: int
             ) -> dict[tuple[str, int], int]:
    """Views per (user, window start).

    >>> expected([{"user": "u", "ts": 30}, {"user": "u", "ts": 70}], 100, 50)
    {('u', 0): 2, ('u', 50): 1}
    """
    counts: Counter[tuple[str, int]] = Counter()
    for view in views:
        ts = view["ts"]
        start = ts - ts % advance_ms
        while start >= 0 and start > ts - size_ms:
            counts[(view["user"], start)] += 1
            start -= advance_ms
    return dict(sorted(counts.items()))
