"""A job of the end-to-end tests: ``local.left`` ⋈ ``local.right`` within 5 s before and
after, a left join over the record timestamps (records-mode event time), pairs to
``local.joined``."""

from framework import StreamTask
from framework.windows import IntervalJoin

WITHIN_MS = 5_000
GRACE_MS = 3_000


class JoinTask(StreamTask):
    def init(self, context):
        self.join = IntervalJoin(context, "joined", left="local.left", right="local.right",
                                 before_ms=WITHIN_MS, after_ms=WITHIN_MS, grace_ms=GRACE_MS,
                                 how="left", late="dead-letter", late_stream="local.late",
                                 output="local.joined")

    def process(self, envelope, collector, coordinator):
        self.join.process(envelope, collector)
