"""The hosts tests' job: a per-key running sum in store ``totals`` (the final state checked)."""

from framework import StreamTask


class SumTask(StreamTask):
    def init(self, context):
        self.totals = context.store("totals")

    def process(self, envelope, collector, coordinator):
        self.totals.put(envelope.key, (self.totals.get(envelope.key) or 0) + envelope.value)
