"""KIP-315's ad join: attribute each click to its auction's impression within a time window.

Inputs `impressions` and `clicks` are keyed by auction id and co-partitioned, so one task
sees both sides of every auction. The join is `framework.windows.IntervalJoin`: clicks
(left) ⋈ impressions (right), an impression joining a click when
``impression.ts <= click.ts <= impression.ts + JOIN_WINDOW_MS``. It is a left join, so a
click that joined nothing comes out of it once the watermark shows no impression can
still join it. Event time is the ``ts`` in each record, and the watermark comes from
watermark records the producer writes into every partition (``source="markers"``), so the
outputs depend neither on which input the worker happened to read first nor on
expansion restarts.

- a click joined to its impression → ``attributed-clicks``
- a click that joined nothing (outside the window, or no impression) → ``late``
- a click seen again (same ``click_id``) → dropped
- per campaign, this task's impressions and attributed clicks → ``ctr``, keyed
  ``"campaign|task"`` (campaign is not the input key: sum the partials of all tasks)
"""

from framework import StreamTask
from framework.windows import EventTime, IntervalJoin
from framework.windows.watermarks import is_watermark

JOIN_WINDOW_MS = 2_000
"""How long after its impression a click still counts. Change it here (and re-run)."""


class AdJoinTask(StreamTask):
    def init(self, context):
        self.task = context.task_name
        self.system = context.config.inputs[0].partition(".")[0]  # local or kafka
        clock = EventTime(context, "joined", source="markers",
                          timestamp=lambda envelope: envelope.value["ts"])
        self.join = IntervalJoin(
            context, "joined", left=f"{self.system}.clicks",
            right=f"{self.system}.impressions", before_ms=JOIN_WINDOW_MS, after_ms=0,
            how="left", event_time=clock)
        self.seen = context.store("seen-clicks")  # click_id -> ts (drops duplicates)
        self.ctr = context.store("ctr")           # campaign -> {impressions, clicks}

    def process(self, envelope, collector, coordinator):
        value = envelope.value
        if not is_watermark(value):
            if envelope.ssp.stream == "impressions":
                self.count(collector, value["campaign"], "impressions")
            elif self.seen.get(value["click_id"]) is not None:
                return  # a duplicate
            else:
                self.seen.put(value["click_id"], value["ts"])
        for pair in self.join.process(envelope, collector):
            click = pair.left
            if pair.right is None:
                collector.send(f"{self.system}.late", key=click["auction"], value=click)
            else:
                impression = pair.right
                collector.send(f"{self.system}.attributed-clicks", key=click["auction"],
                               value={**click, "campaign": impression["campaign"],
                                      "impression_ts": impression["ts"]})
                self.count(collector, impression["campaign"], "clicks")

    def count(self, collector, campaign, what):
        counts = self.ctr.get(campaign) or {"impressions": 0, "clicks": 0}
        counts[what] += 1
        self.ctr.put(campaign, counts)
        collector.send(f"{self.system}.ctr", key=f"{campaign}|{self.task}",
                       value={"campaign": campaign, "task": self.task, **counts})

    def window(self, collector, coordinator):
        """Forget click ids no copy can follow any more (only deletes)."""
        watermark = self.join.watermark
        if watermark is None:
            return
        for click_id, ts in list(self.seen.all()):
            if ts < watermark:  # every copy of this click has been read
                self.seen.delete(click_id)
