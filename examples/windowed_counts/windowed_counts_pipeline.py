"""Windowed counts as a pipeline: page views per user in hopping windows of 5 minutes every
minute, in event time — the outputs of `windowed_counts_task`.

The window is `framework.windows`' own (the task's `WINDOW`, store ``views``), closed by
the watermark records the producer writes (``event_time="markers"``); a view's event time
is its ``ts``. Each closed window becomes ``{"user", "start", "end", "views"}`` in
``views-per-user``; a view behind the watermark goes to ``late-views``.
"""

from typing import Any

from windowed_counts_task import WINDOW

from framework.pipelines import Pipeline, Stream
from framework.windows import WindowResult, count


def as_record(user: str, window: WindowResult) -> tuple[str, dict[str, Any]]:
    return user, {"user": user, "start": window.start, "end": window.end,
                  "views": window.value}


def build() -> Pipeline:
    p = Pipeline()
    views: Stream[str, dict[str, Any]] = p.source("page-views")
    (views.with_timestamp(lambda user, view: view["ts"])
          .window(WINDOW, count(), store="views", event_time="markers",
                  late="dead-letter", late_stream="late-views")
          .map(as_record)
          .to("views-per-user"))
    return p
