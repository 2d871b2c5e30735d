"""Page views enriched with the user's profile as it was when the view happened.

A stream-table join: `profiles` is a changelog of user profiles (the table), `page-views`
the stream; both are keyed by user id. A profile update with ``ts = T`` applies to the
views with ``ts > T`` only — by event time, not by which input the worker read first. So
a view waits in a store until the watermark passes it (then every profile update before
it has been read), and is enriched from the profile versions kept by ``ts``.

The same task runs in both layouts: profiles co-partitioned with page views (`job.toml`,
each task holds its users' profiles) or profiles as a broadcast input
(`job_broadcast.toml`, every task holds every profile).
"""

from framework import StreamTask
from framework.windows.watermarks import Watermarks, is_watermark


def ts_key(ts):
    return f"{ts:016d}"  # fixed width: string order is time order


def profile_user(key):
    """The profiles input's record key (the user) of a ``profiles`` store key "user|ts":
    what routes a query of the store (job.toml's ``key_to_input``)."""
    return key.rsplit("|", 1)[0]


def profile_at(profiles, user, ts):
    """The user's latest profile version with ``version.ts < ts`` in ``profiles``, or None."""
    found = None
    for _, version in profiles.range(f"{user}|", f"{user}|{ts_key(ts)}"):
        found = version
    return found


def drop_hidden_versions(profiles, watermark):
    """Drop profile versions no future view can see: a newer one is older than the
    watermark, and every view still to come is newer than the watermark."""
    previous = None
    for key, version in list(profiles.all()):
        user = profile_user(key)
        if previous and previous[0] == user and version["ts"] < watermark:
            profiles.delete(previous[1])
        previous = (user, key)


class EnrichmentTask(StreamTask):
    def init(self, context):
        self.profiles = context.store("profiles")  # "user|ts" -> profile version
        self.views = context.store("waiting-views")  # "ts|view_id" -> view, until watermark
        self.watermarks = Watermarks(context.store("watermarks"), context.ssps)

    def process(self, envelope, collector, coordinator):
        value = envelope.value
        if is_watermark(value):
            watermark = self.watermarks.observe(envelope)
            if watermark is not None:
                self.emit_views_before(envelope.ssp.system, collector, watermark)
        elif envelope.ssp.stream == "profiles":
            self.profiles.put(f"{value['user']}|{ts_key(value['ts'])}", value)
        else:
            self.views.put(f"{ts_key(value['ts'])}|{value['view_id']}", value)

    def emit_views_before(self, system, collector, watermark):
        """Views older than the watermark: every profile update before them is here."""
        for key, view in list(self.views.range(ts_key(0), ts_key(watermark))):
            self.views.delete(key)
            profile = self.profile_at(view["user"], view["ts"])
            collector.send(f"{system}.enriched-views", key=view["user"],
                           value={**view, "profile": profile})

    def profile_at(self, user, ts):
        return profile_at(self.profiles, user, ts)

    def window(self, collector, coordinator):
        watermark = self.watermarks.current()
        if watermark is not None:
            drop_hidden_versions(self.profiles, watermark)
