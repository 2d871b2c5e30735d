"""KIP-315's ad join: attribute each click to its auction's impression within a time window.

Inputs `impressions` and `clicks` are keyed by auction id and co-partitioned, so one task
sees both sides of every auction. Everything is decided by event time (the ``ts`` in each
record) and by watermark records the producer writes into every partition, so the outputs
do not depend on which input the worker happened to read first, nor on expansion restarts.

- a click within ``[impression.ts, impression.ts + JOIN_WINDOW_MS]`` → ``attributed-clicks``
- any other click (outside the window, or no impression) → ``late``
- a click seen again (same ``click_id``) → dropped
- per campaign, this task's impressions and attributed clicks → ``ctr``, keyed
  ``"campaign|task"`` (campaign is not the input key: sum the partials of all tasks)
"""

from framework import StreamTask
from framework.windows.watermarks import Watermarks, is_watermark

JOIN_WINDOW_MS = 2_000
"""How long after its impression a click still counts. Change it here (and re-run)."""


class AdJoinTask(StreamTask):
    def init(self, context):
        self.task = context.task_name
        self.impressions = context.store("impressions")  # auction -> {campaign, ts}
        self.waiting = context.store("waiting-clicks")   # "auction|click_id" -> click
        self.seen = context.store("seen-clicks")          # click_id -> ts (drops duplicates)
        self.ctr = context.store("ctr")                   # campaign -> {impressions, clicks}
        self.watermarks = Watermarks(context.store("watermarks"), context.ssps)

    def process(self, envelope, collector, coordinator):
        system = envelope.ssp.system  # outputs go to the inputs' system (local or Kafka)
        if is_watermark(envelope.value):
            watermark = self.watermarks.observe(envelope)
            if watermark is not None:
                self.give_up_waiting(system, collector, watermark)
        elif envelope.ssp.stream == "impressions":
            self.on_impression(system, collector, envelope.value)
        else:
            self.on_click(system, collector, envelope.value)

    def on_impression(self, system, collector, impression):
        auction = impression["auction"]
        self.impressions.put(auction, {"campaign": impression["campaign"],
                                       "ts": impression["ts"]})
        self.count(system, collector, impression["campaign"], "impressions")
        for key, click in list(self.waiting.prefix(f"{auction}|")):
            self.waiting.delete(key)  # its impression arrived after it: join it now
            self.join(system, collector, impression, click)

    def on_click(self, system, collector, click):
        if self.seen.get(click["click_id"]) is not None:
            return  # a duplicate
        self.seen.put(click["click_id"], click["ts"])
        impression = self.impressions.get(click["auction"])
        if impression is None:  # not here yet: wait until the watermark passes the click
            self.waiting.put(f"{click['auction']}|{click['click_id']}", click)
        else:
            self.join(system, collector, {**impression, "auction": click["auction"]}, click)

    def join(self, system, collector, impression, click):
        if impression["ts"] <= click["ts"] <= impression["ts"] + JOIN_WINDOW_MS:
            collector.send(f"{system}.attributed-clicks", key=click["auction"], value={
                **click, "campaign": impression["campaign"],
                "impression_ts": impression["ts"]})
            self.count(system, collector, impression["campaign"], "clicks")
        else:
            collector.send(f"{system}.late", key=click["auction"], value=click)

    def count(self, system, collector, campaign, what):
        counts = self.ctr.get(campaign) or {"impressions": 0, "clicks": 0}
        counts[what] += 1
        self.ctr.put(campaign, counts)
        collector.send(f"{system}.ctr", key=f"{campaign}|{self.task}",
                       value={"campaign": campaign, "task": self.task, **counts})

    def give_up_waiting(self, system, collector, watermark):
        """Every impression older than the watermark is here: waiting clicks before it are late."""
        for key, click in list(self.waiting.all()):
            if click["ts"] < watermark:
                self.waiting.delete(key)
                collector.send(f"{system}.late", key=click["auction"], value=click)

    def window(self, collector, coordinator):
        """Expire state no future record can need (only deletes; outputs never depend on it)."""
        watermark = self.watermarks.current()
        if watermark is None:
            return
        for auction, impression in list(self.impressions.all()):
            if impression["ts"] + JOIN_WINDOW_MS < watermark:  # its window has closed
                self.impressions.delete(auction)
        for click_id, ts in list(self.seen.all()):
            if ts < watermark:  # every copy of this click has been read
                self.seen.delete(click_id)
