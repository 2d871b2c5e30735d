"""KIP-315's ad join as a pipeline: the outputs of `ad_join_task`, built from operators.

Clicks (left) interval-join impressions (right) on the auction id with the task's window
(``impression.ts <= click.ts <= impression.ts + JOIN_WINDOW_MS``), a left join in event
time (each record's ``ts``) closed by the producer's watermark records
(``event_time="markers"``) — `framework.windows.IntervalJoin`, state in ``joined``.
Two custom steps do what no operator does:

- `FirstCopies` passes the join's results of the first copy of each click only (a retried
  send delivers a click twice; both copies would join). It forgets a click id once the
  join's watermark passes the click's ``ts``: every copy has been read by then.
- `CampaignCounts` counts, per campaign, this task's impressions and attributed clicks in
  ``ctr`` and emits them keyed ``"campaign|task"`` — per-task partials, as the task does
  (campaign is not the input key; sum the partials of all tasks).

Each impression is counted before it joins, as in the task, so ``ctr`` sees the same
updates in the same order.
"""

from typing import Any

from ad_join_task import JOIN_WINDOW_MS

from framework.api import KeyValueStore, TaskContext
from framework.pipelines import Emit, Pipeline, Step, Stream

Record = dict[str, Any]
Pair = tuple[Record, Record | None]
"""A click and its impression (None: the click joined nothing)."""


class FirstCopies(Step[str, Pair, str, Pair]):
    """The join's results of the first copy of each click (``seen-clicks``: id → ts)."""

    def init(self, context: TaskContext) -> None:
        self.seen: KeyValueStore = context.store("seen-clicks")

    def process(self, auction: str, pair: Pair, emit: Emit[str, Pair]) -> None:
        click = pair[0]
        if self.seen.get(click["click_id"]) is None:
            self.seen.put(click["click_id"], click["ts"])
            emit(auction, pair)

    def window(self, emit: Emit[str, Pair]) -> None:
        """Forget click ids no copy can follow any more (only deletes)."""
        watermark = emit.watermark
        if watermark is None:
            return
        for click_id, ts in list(self.seen.all()):
            if ts < watermark:  # every copy of this click has been read and joined
                self.seen.delete(click_id)


class CampaignCounts(Step[str, tuple[str, str], str, Record]):
    """This task's impressions and attributed clicks per campaign (``ctr``)."""

    def init(self, context: TaskContext) -> None:
        self.task = context.task_name
        self.ctr: KeyValueStore = context.store("ctr")

    def process(self, auction: str, counted: tuple[str, str], emit: Emit[str, Record]
                ) -> None:
        campaign, what = counted
        counts = self.ctr.get(campaign) or {"impressions": 0, "clicks": 0}
        counts[what] += 1
        self.ctr.put(campaign, counts)
        emit(f"{campaign}|{self.task}", {"campaign": campaign, "task": self.task, **counts})


def build() -> Pipeline:
    p = Pipeline()
    impressions: Stream[str, Record] = p.source("impressions")
    clicks: Stream[str, Record] = p.source("clicks")
    shown = impressions.map_values(lambda impression: (impression["campaign"], "impressions"))
    joined = (clicks.with_timestamp(lambda auction, click: click["ts"])
                    .left_join(impressions.with_timestamp(lambda auction, shown: shown["ts"]),
                               lambda click, impression: (click, impression),
                               before_ms=JOIN_WINDOW_MS, after_ms=0, store="joined",
                               event_time="markers")
                    .process(FirstCopies, stores=["seen-clicks"], same_keys=True))
    attributed, late = joined.branch(lambda auction, pair: pair[1] is not None)
    (attributed.map_values(lambda pair: {**pair[0], "campaign": pair[1]["campaign"],
                                         "impression_ts": pair[1]["ts"]})
               .to("attributed-clicks"))
    late.map_values(lambda pair: pair[0]).to("late")
    clicked = attributed.map_values(lambda pair: (pair[1]["campaign"], "clicks"))
    shown.merge(clicked).process(CampaignCounts, stores=["ctr"]).to("ctr")
    return p
