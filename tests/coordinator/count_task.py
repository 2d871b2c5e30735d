"""The coordinator tests' job: count records per (stream, key); emit count and sequence number."""

from framework import StreamTask


class CountTask(StreamTask):
    def init(self, context):
        self.counts = context.store("counts")

    def process(self, envelope, collector, coordinator):
        name = f"{envelope.ssp.stream}/{envelope.key}"
        count = (self.counts.get(name) or 0) + 1
        self.counts.put(name, count)
        collector.send("local.counts", key=name,
                       value={"count": count, "seq": envelope.value["seq"],
                              "partition": envelope.ssp.partition})


class BoomTask(StreamTask):
    """Fails on every record: the supervisor must give up on its worker."""

    def process(self, envelope, collector, coordinator):
        raise RuntimeError(f"boom on {envelope.key}")


class StuckTask(CountTask):
    """Counts, but hangs forever (a blocking call, the event loop frozen) on key ``k007``."""

    def process(self, envelope, collector, coordinator):
        if envelope.key == "k007":
            import time

            while True:
                time.sleep(60)
        super().process(envelope, collector, coordinator)


class TimedCountTask(CountTask):
    """Counts, and stamps each output with its processing time (`bench.in_place`: the
    longest gap in each task's progress)."""

    def process(self, envelope, collector, coordinator):
        import time

        super().process(envelope, _Stamped(collector, time.time()), coordinator)


class _Stamped:
    """A collector adding ``"t"`` (the processing time) to every value it sends."""

    def __init__(self, collector, at):
        self.collector, self.at = collector, at

    def send(self, stream, key=None, value=None, **options):
        self.collector.send(stream, key=key, value={**value, "t": self.at}, **options)


class SlowCountTask(CountTask):
    """Counts, a millisecond per record: a job far behind a burst of input."""

    def process(self, envelope, collector, coordinator):
        import time

        time.sleep(0.001)
        super().process(envelope, collector, coordinator)


class UndeclaredStoreTask(CountTask):
    """Asks in ``init`` for a store the job file does not declare: no restart can help."""

    def init(self, context):
        super().init(context)
        self.view = context.store("view")
