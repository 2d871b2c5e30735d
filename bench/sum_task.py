"""The per-key sum task the benches run, as the source of a job folder's ``sum_task.py``:
one definition, so every bench measures the same job (only where it sends differs)."""

from __future__ import annotations

__all__ = ["sum_task_source"]

_SOURCE = '''\
from framework import StreamTask


class SumTask(StreamTask):
    def init(self, context):
        self.totals = context.store("totals")

    def process(self, envelope, collector, coordinator):
        total = (self.totals.get(envelope.key) or 0) + envelope.value["amount"]
        self.totals.put(envelope.key, total)
        collector.send(SEND_TO, key=envelope.key, value=total)
'''


def sum_task_source(send_to: str) -> str:
    """The task module, sending each new total to ``send_to`` — a Python expression over
    ``envelope`` (e.g. ``f"{envelope.ssp.system}.sums"``) or a quoted stream name."""
    return _SOURCE.replace("SEND_TO", send_to)
