"""The sum task, but one output late in partition 0 carries a header, and the task asks
for a commit early on: its worker commits outputs as columns first, then (from the
record with the header on) as rows — the switch of `Committer` under test."""

from framework import StreamTask

EARLY, LATE = 1_000, 3_000  # offsets of partition 0: a commit request, then the header


class LateHeadersTask(StreamTask):
    def init(self, context):
        self.totals = context.store("totals")

    def process(self, envelope, collector, coordinator):
        total = (self.totals.get(envelope.key) or 0) + envelope.value["amount"]
        self.totals.put(envelope.key, total)
        first = envelope.ssp.partition == 0
        if first and envelope.offset == EARLY:
            coordinator.commit()
        collector.send(f"{envelope.ssp.system}.{envelope.ssp.stream}-sums", key=envelope.key,
                       value={"sum": total, "n": envelope.value["n"]},
                       headers={"late": b"1"} if first and envelope.offset == LATE else None)
