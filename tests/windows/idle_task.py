"""A job of the end-to-end tests: tumbling counts of 10 s over the record timestamps (the
default event time), late records dead-lettered."""

from framework import StreamTask
from framework.windows import Tumbling, Windows, count


class IdleTask(StreamTask):
    def init(self, context):
        self.windows = Windows(context, "w", Tumbling(size_ms=10_000), count(),
                               late="dead-letter", late_stream="local.late",
                               output="local.counts")

    def process(self, envelope, collector, coordinator):
        self.windows.process(envelope, collector)
