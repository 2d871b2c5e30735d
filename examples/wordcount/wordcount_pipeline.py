"""Word count as a pipeline: the same counts and outputs as `wordcount_task`, in one line
of operators.

``words`` is keyed by word, so the count needs no re-key; the store ``counts`` holds each
word's count and every update goes to ``word-counts`` with the sequence number of the
record that caused it. Streams are named without their system, so the same pipeline runs
on the local log and on Kafka (`sampan drill --system kafka`).
"""

from typing import Any

from framework.pipelines import Pipeline, Stream


def build() -> Pipeline:
    p = Pipeline()
    words: Stream[str, dict[str, Any]] = p.source("words")
    (words.count(store="counts",
                 result=lambda count, record: {"count": count, "seq": record.get("seq")})
          .to("word-counts"))
    return p
