"""The host drill's job: a per-key running sum in store ``totals`` (its final state is
what the drill verifies key by key)."""

from __future__ import annotations

from typing import Any

from framework import StreamTask


class SumTask(StreamTask):
    """Adds each record's integer value to its key's total."""

    def init(self, context: Any) -> None:
        self.totals = context.store("totals")

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        self.totals.put(envelope.key, (self.totals.get(envelope.key) or 0) + envelope.value)
