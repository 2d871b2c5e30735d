"""Windowed aggregations in event time over task stores: tumbling, hopping and session
windows keyed by record key, with grace, reducers (several at once with `aggregate`) and
a late-record policy; and `IntervalJoin`, a windowed stream–stream join.

>>> from framework.windows import Hopping, Windows, count
>>> Hopping(size_ms=300_000, advance_ms=60_000).starts(90_000)
[0, 60000]

A task builds `Windows` in ``init`` and passes records to ``Windows.process``; see
docs/windows.md.
"""

from framework.windows.aggregation import LatePolicy, WindowResult, Windows
from framework.windows.event_time import EventTime, Timestamp
from framework.windows.join import IntervalJoin, JoinResult
from framework.windows.kinds import Hopping, Session, Tumbling, WindowError, WindowKind
from framework.windows.reducers import (
    Reducer,
    aggregate,
    count,
    fold,
    max_of,
    mean_of,
    min_of,
    sum_of,
)

__all__ = [
    "EventTime",
    "Hopping",
    "IntervalJoin",
    "JoinResult",
    "LatePolicy",
    "Reducer",
    "Session",
    "Timestamp",
    "Tumbling",
    "WindowError",
    "WindowKind",
    "WindowResult",
    "Windows",
    "aggregate",
    "count",
    "fold",
    "max_of",
    "mean_of",
    "min_of",
    "sum_of",
]
