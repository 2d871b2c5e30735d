"""A task whose `window` only writes its store, and whose `process` fails on a negative amount."""

from framework import StreamTask


class TickTask(StreamTask):
    def init(self, context):
        self.totals = context.store("totals")

    def process(self, envelope, collector, coordinator):
        if envelope.value["amount"] < 0:
            raise ValueError(f"negative amount {envelope.value['amount']}")
        self.totals.put(envelope.key, envelope.value["amount"])

    def window(self, collector, coordinator):
        self.totals.put("ticks", (self.totals.get("ticks") or 0) + 1)
