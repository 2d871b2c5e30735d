"""A per-key running sum that, on a record with ``"explode": true``, first writes a wrong
total, sends an output and asks for a commit — then raises: all of that must be undone."""

from framework import StreamTask


class FragileTask(StreamTask):
    def init(self, context):
        self.totals = context.store("totals")
        if context.config.name == "broken-init":
            raise RuntimeError("cannot reach the enrichment table")

    def process(self, envelope, collector, coordinator):
        total = (self.totals.get(envelope.key) or 0) + envelope.value["amount"]
        self.totals.put(envelope.key, total)
        collector.send(f"{envelope.ssp.system}.{envelope.ssp.stream}-sums", key=envelope.key,
                       value={"sum": total, "n": envelope.value["n"]})
        if envelope.value.get("explode"):
            self.totals.delete("other")
            coordinator.commit()
            raise RuntimeError(f"boom on {envelope.key}")
