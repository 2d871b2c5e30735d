"""A job of the end-to-end tests: tumbling, hopping and session windows over one input,
several named results each (`aggregate`), one `EventTime` (records) shared by all three."""

from framework import StreamTask
from framework.windows import (
    EventTime,
    Hopping,
    Session,
    Tumbling,
    Windows,
    aggregate,
    count,
    max_of,
    mean_of,
    sum_of,
)

GRACE_MS = 5_000
STATS = aggregate(views=count(), spent=sum_of("amount"), top=max_of("amount"),
                  avg=mean_of("amount"))
KINDS = {"tumbling": Tumbling(size_ms=60_000, grace_ms=GRACE_MS),
         "hopping": Hopping(size_ms=300_000, advance_ms=60_000, grace_ms=GRACE_MS),
         "sessions": Session(gap_ms=30_000, grace_ms=GRACE_MS)}


class StatsTask(StreamTask):
    def init(self, context):
        clock = EventTime(context, "tumbling", timestamp=lambda envelope: envelope.value["ts"])
        self.windows = [Windows(context, name, kind, STATS, event_time=clock,
                                late="dead-letter", late_stream="local.late",
                                output=f"local.{name}")
                        for name, kind in KINDS.items()]

    def process(self, envelope, collector, coordinator):
        for windows in self.windows:
            windows.process(envelope, collector)
