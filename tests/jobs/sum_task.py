"""The end-to-end tests' job: a per-key running sum to ``<input>-sums``, with the key's record
number ``n`` that caused it."""

from framework import StreamTask


class SumTask(StreamTask):
    def init(self, context):
        self.totals = context.store("totals")

    def process(self, envelope, collector, coordinator):
        total = (self.totals.get(envelope.key) or 0) + envelope.value["amount"]
        self.totals.put(envelope.key, total)
        collector.send(f"{envelope.ssp.system}.{envelope.ssp.stream}-sums", key=envelope.key,
                       value={"sum": total, "n": envelope.value["n"]})
