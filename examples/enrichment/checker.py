"""The enrichment's exact expected output, as a pure function of the input records.

This is the specification the job is checked against (and the one a batch verifier, e.g.
Spark, implements). It ignores watermark records and processing order: they decide *when*
the job emits, never *what*, and the order per user is fixed.

Inputs (record values, watermark records left out):
- ``profiles``: ``{"user": str, "ts": int, ...profile fields}``: profile versions; at most
  one per (user, ts).
- ``views``: ``{"user": str, "view_id": str, "ts": int, ...view fields}``; view ids unique.

Output: user → that user's enriched views in ``(ts, view_id)`` order, each the view's
value plus ``"profile"``: the user's profile version with the greatest ``ts`` *strictly
less* than the view's ``ts`` (an update applies to later views only), or None. The job
writes them to ``enriched-views`` keyed by user, in this order for each user.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["expected"]


def expected(profiles: Iterable[Mapping[str, Any]], views: Iterable[Mapping[str, Any]]
             ) -> dict[str, list[dict[str, Any]]]:
    """Each user's enriched views, in order.

    >>> out = expected([{"user": "u", "ts": 10, "plan": "free"},
    ...                 {"user": "u", "ts": 20, "plan": "pro"}],
    ...                [{"user": "u", "view_id": "v3", "ts": 25},
    ...                 {"user": "u", "view_id": "v2", "ts": 20},
    ...                 {"user": "u", "view_id": "v1", "ts": 5}])
    >>> [(v["view_id"], v["profile"] and v["profile"]["plan"]) for v in out["u"]]
    [('v1', None), ('v2', 'free'), ('v3', 'pro')]
    """
    versions: dict[str, list[tuple[int, Mapping[str, Any]]]] = {}
    for profile in profiles:
        versions.setdefault(profile["user"], []).append((profile["ts"], profile))
    for history in versions.values():
        history.sort(key=lambda version: version[0])
    out: dict[str, list[dict[str, Any]]] = {}
    for view in sorted(views, key=lambda v: (v["ts"], v["view_id"])):
        history = versions.get(view["user"], [])
        before = bisect.bisect_left([ts for ts, _ in history], view["ts"])
        profile = dict(history[before - 1][1]) if before else None
        out.setdefault(view["user"], []).append({**view, "profile": profile})
    return out
