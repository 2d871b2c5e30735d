"""Count each word; emit the word's new count with the sequence number that caused it."""

from framework import StreamTask


class WordCountTask(StreamTask):
    def init(self, context):
        self.counts = context.store("counts")

    def process(self, envelope, collector, coordinator):
        word = envelope.key
        count = (self.counts.get(word) or 0) + 1
        self.counts.put(word, count)
        # Output to the input's system, so the same task runs on the local log or Kafka.
        collector.send(f"{envelope.ssp.system}.word-counts", key=word,
                       value={"count": count, "seq": envelope.value.get("seq")})
