"""The ad join's exact expected output, as a pure function of the input records.

This is the specification the job is checked against (and the one a batch verifier, e.g.
Spark, implements). It ignores watermark records and processing order: they decide *when*
the job emits, never *what*.

Inputs (record values, watermark records left out):
- ``impressions``: ``{"auction": str, "campaign": str, "ts": int}``, at most one per auction.
- ``clicks``: ``{"auction": str, "click_id": str, "ts": int}``; a click may appear several
  times (same ``click_id``, same content): the copies are one click.

Output `Expected`:
- ``attributed``: click_id → ``{**click, "campaign", "impression_ts"}`` for each click with
  ``impression.ts <= click.ts <= impression.ts + window_ms`` (its auction's impression).
- ``late``: click_id → click, for every other click (after the window, before the
  impression, or with no impression at all).
- ``ctr``: campaign → ``{"impressions": n, "clicks": m}``: its impressions and attributed
  clicks. The job emits these per task (key ``"campaign|task"``); the sum over tasks of
  each task's last value equals this.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Expected", "expected"]

Click = Mapping[str, Any]


@dataclass
class Expected:
    """What the job must have emitted, exactly (see the module docstring)."""

    attributed: dict[str, dict[str, Any]] = field(default_factory=dict)
    late: dict[str, dict[str, Any]] = field(default_factory=dict)
    ctr: dict[str, dict[str, int]] = field(default_factory=dict)


def expected(impressions: Iterable[Click], clicks: Iterable[Click], window_ms: int) -> Expected:
    """Attributed clicks, late clicks and per-campaign counts for these inputs.

    >>> out = expected([{"auction": "a1", "campaign": "c", "ts": 100}],
    ...                [{"auction": "a1", "click_id": "k1", "ts": 150},
    ...                 {"auction": "a1", "click_id": "k1", "ts": 150},
    ...                 {"auction": "a1", "click_id": "k2", "ts": 400},
    ...                 {"auction": "a9", "click_id": "k3", "ts": 150}], window_ms=200)
    >>> sorted(out.attributed), sorted(out.late), out.ctr
    (['k1'], ['k2', 'k3'], {'c': {'impressions': 1, 'clicks': 1}})
    """
    by_auction: dict[str, Click] = {}
    out = Expected()
    for impression in impressions:
        if impression["auction"] in by_auction:
            raise ValueError(f"two impressions for auction {impression['auction']!r}")
        by_auction[impression["auction"]] = impression
        counts = out.ctr.setdefault(impression["campaign"], {"impressions": 0, "clicks": 0})
        counts["impressions"] += 1
    unique = {click["click_id"]: dict(click) for click in clicks}
    for click_id, click in sorted(unique.items()):
        impression = by_auction.get(click["auction"])
        if impression and impression["ts"] <= click["ts"] <= impression["ts"] + window_ms:
            out.attributed[click_id] = {**click, "campaign": impression["campaign"],
                                        "impression_ts": impression["ts"]}
            out.ctr[impression["campaign"]]["clicks"] += 1
        else:
            out.late[click_id] = click
    return out
