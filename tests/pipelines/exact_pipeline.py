"""The pipeline of the end-to-end tests: a re-key, an aggregation and a window on the
intermediate stream, and a join of a source with another intermediate stream.

- ``events`` (key: user; value ``{"user", "n", "page", "amount"}``; timestamp: event time)
  are re-keyed by page through ``by-page``; per page a running sum (each output names the
  record that made it) goes to ``page-sums``, and tumbling counts per page to
  ``page-windows`` (a grace wider than the test's span of event time, so windows close
  only when a record ten minutes ahead passes every partition);
- ``clicks`` (key: click id; value ``{"id", "user", "n"}``, one millisecond after the
  event it clicks) are re-keyed by user through ``clicks-by-user`` and joined with
  ``events`` by user within 5 ms: each click to exactly its event, in ``attributed``.

The test copies this file next to its job file with SYSTEM and PREFIX set.
"""

from typing import Any

from framework.pipelines import Pipeline, Stream
from framework.windows import Tumbling, count

SYSTEM = "local"
PREFIX = ""
WINDOW_MS = 1000
GRACE_MS = 600_000

Event = dict[str, Any]


def stream(name: str) -> str:
    return f"{SYSTEM}.{PREFIX}{name}"


def add(total: Event, event: Event) -> Event:
    return {"sum": total["sum"] + event["amount"], "user": event["user"], "n": event["n"]}


def build() -> Pipeline:
    p = Pipeline()
    events: Stream[str, Event] = p.source(stream("events"))
    clicks: Stream[str, Event] = p.source(stream("clicks"))
    by_page = events.partition_by(lambda user, event: event["page"], name="by-page")
    by_page.aggregate(lambda: {"sum": 0}, add, store="page-sums").to(stream("page-sums"))
    by_page.window(Tumbling(size_ms=WINDOW_MS, grace_ms=GRACE_MS), count(),
                   store="page-windows").to(stream("page-windows"))
    by_user = clicks.partition_by(lambda click_id, click: click["user"], name="clicks-by-user")
    events.join(by_user, lambda event, click: {"n": event["n"], "click": click["id"]},
                before_ms=0, after_ms=5, store="attributed", grace_ms=GRACE_MS) \
        .to(stream("attributed"))
    return p
