"""The end-to-end tests' job: a per-key running sum to ``<input>-sums``, with the key's record
number ``n`` that caused it."""

import time

from framework import StreamTask


class SumTask(StreamTask):
    def init(self, context):
        self.totals = context.store("totals")

    def process(self, envelope, collector, coordinator):
        total = (self.totals.get(envelope.key) or 0) + envelope.value["amount"]
        self.totals.put(envelope.key, total)
        collector.send(f"{envelope.ssp.system}.{envelope.ssp.stream}-sums", key=envelope.key,
                       value=self.output(envelope, total))

    def output(self, envelope, total):
        return {"sum": total, "n": envelope.value["n"]}


class StampedSumTask(SumTask):
    """Also stamps each output with when (``t``) and from which input partition (``p``)
    its record was processed, and when it was written (``w``, ms: the record's timestamp)
    (`bench.rebalance_gaps`: gaps in each task's progress, and how long records waited)."""

    def output(self, envelope, total):
        return {"sum": total, "n": envelope.value["n"], "t": time.time(),
                "p": envelope.ssp.partition, "w": envelope.timestamp}
