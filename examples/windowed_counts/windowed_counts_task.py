"""Page views per user in hopping windows of 5 minutes every minute, in event time.

Each closed window becomes one record ``{"user", "start", "end", "views"}`` in
``views-per-user`` (keyed by user). Event time is the ``ts`` in each view, and the windows
close by the watermark records ``{"watermark": T}`` the producer writes into every
partition (a promise that no later view has ``ts < T``), so every window closes exactly
once with every view in it — also while ``page-views`` expands. A view behind the
watermark would go to ``late-views`` (the drill checks there are none).
"""

import logging

from framework import StreamTask
from framework.windows import EventTime, Hopping, Windows, count

MINUTE = 60_000
WINDOW = Hopping(size_ms=5 * MINUTE, advance_ms=MINUTE)
"""The windows counted; change them here (the checker and the Spark verifier read it)."""

log = logging.getLogger(__name__)


class WindowedCountsTask(StreamTask):
    def init(self, context):
        system = context.config.inputs[0].partition(".")[0]  # local or kafka
        self.output = f"{system}.views-per-user"
        clock = EventTime(context, "views", source="markers",
                          timestamp=lambda envelope: envelope.value["ts"])
        self.views = Windows(context, "views", WINDOW, count(), event_time=clock,
                             late="dead-letter", late_stream=f"{system}.late-views")

    def process(self, envelope, collector, coordinator):
        for window in self.views.process(envelope, collector):
            collector.send(self.output, key=window.key, value={
                "user": window.key, "start": window.start, "end": window.end,
                "views": window.value})

    def window(self, collector, coordinator, times):
        """How far event time trails the wall clock (the workload's clock is simulated)."""
        if times.watermark_ms is not None:
            log.debug("watermark %d, wall clock %d", times.watermark_ms, times.wall_ms)
