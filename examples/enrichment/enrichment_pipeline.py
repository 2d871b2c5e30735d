"""Page views enriched with the user's profile as it was when the view happened — as a
pipeline, with the outputs of `enrichment_task`.

The join is by event time: a profile version with ``ts = T`` applies to the views with
``ts > T`` only, whichever input the worker reads first. The pipeline API's table join
(`Stream.join_table`) reads the table as it is when the view is processed, so this
pipeline merges the two streams into a custom step, `EnrichByEventTime`, that keeps the
profile versions and the waiting views in stores and enriches a view once the watermark
records (which reach a step: no markers window or join follows it) pass it.
"""

from typing import Any

from enrichment_task import drop_hidden_versions, profile_at, ts_key

from framework.api import KeyValueStore, TaskContext
from framework.pipelines import Emit, Pipeline, Step, Stream
from framework.windows.watermarks import Watermarks, is_watermark

Record = dict[str, Any]


class EnrichByEventTime(Step[str, Record, str, Record]):
    """Profile versions by ``user|ts``, views waiting by ``ts|view_id`` until the
    watermark passes them, then each view with the profile version before it."""

    def init(self, context: TaskContext) -> None:
        self.profiles: KeyValueStore = context.store("profiles")
        self.views: KeyValueStore = context.store("waiting-views")
        self.watermarks = Watermarks(context.store("watermarks"), context.ssps)

    def process(self, key: str, value: Record, emit: Emit[str, Record]) -> None:
        envelope = emit.envelope
        assert envelope is not None  # process always has the record's envelope
        if is_watermark(value):
            watermark = self.watermarks.observe(envelope)
            if watermark is not None:
                self.emit_views_before(emit, watermark)
        elif envelope.ssp.stream == "profiles":
            self.profiles.put(f"{value['user']}|{ts_key(value['ts'])}", value)
        else:
            self.views.put(f"{ts_key(value['ts'])}|{value['view_id']}", value)

    def emit_views_before(self, emit: Emit[str, Record], watermark: int) -> None:
        for key, view in list(self.views.range(ts_key(0), ts_key(watermark))):
            self.views.delete(key)
            emit(view["user"], {**view, "profile": self.profile_at(view["user"], view["ts"])})

    def profile_at(self, user: str, ts: int) -> Record | None:
        found: Record | None = profile_at(self.profiles, user, ts)
        return found

    def window(self, emit: Emit[str, Record]) -> None:
        """Drop profile versions no future view can see (as the task does)."""
        watermark = self.watermarks.current()
        if watermark is not None:
            drop_hidden_versions(self.profiles, watermark)


def build() -> Pipeline:
    p = Pipeline()
    views: Stream[str, Record] = p.source("page-views")
    profiles: Stream[str, Record] = p.source("profiles")
    (views.merge(profiles)
          .process(EnrichByEventTime, stores=["profiles", "waiting-views", "watermarks"])
          .to("enriched-views"))
    return p
