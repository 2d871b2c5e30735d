"""Verification in Spark: a word-count job's store and outputs against its inputs."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from sparkjobs import on_system, wordcount_job

from framework.cli import main
from framework.config import load_config
from framework.coordinator.builder import build_job_model
from framework.metadata import publish_model
from framework.spark.errors import VerificationError
from framework.spark.verify import verify_job
from framework.systems.base import ProducerRecord

INPUTS = ["a", "a", "a", "b", "b", "c", "d"]
"""Truth: a 3, b 2, c 1, d 1."""


def _count(word: str, count: int, seq: int) -> ProducerRecord:
    return ProducerRecord("word-counts", word.encode(),
                          json.dumps({"count": count, "seq": seq}).encode())


@pytest.fixture
def job(tmp_path: Path) -> Path:
    """A word-count job state built by hand: ``a``, ``b`` right, ``c`` wrong in the store,
    ``d`` never processed, ``e`` never produced; a stale changelog partition outside the
    job model says ``b`` is 99."""
    path = wordcount_job(tmp_path / "wordcount")
    config = load_config(path)
    changelog = config.changelog_stream("counts").partition(".")[2]

    async def build(system: Any) -> None:
        await system.create_stream("words", 2)
        await system.create_stream("word-counts", 2)
        await system.create_stream(changelog, 3, compacted=True)
        seqs: dict[str, int] = {}
        records = []
        for word in INPUTS:
            seqs[word] = seqs.get(word, 0) + 1
            records.append(ProducerRecord("words", word.encode(),
                                          json.dumps({"seq": seqs[word]}).encode()))
        await system.produce(records)
        await system.produce([
            ProducerRecord(changelog, b"a", b"2", partition=0),
            ProducerRecord(changelog, b"a", b"3", partition=0),
            ProducerRecord(changelog, b"b", b"2", partition=1),
            ProducerRecord(changelog, b"c", b"5", partition=0),
            ProducerRecord(changelog, b"e", b"1", partition=1),
            ProducerRecord(changelog, b"b", b"99", partition=2),
        ])
        await system.produce([_count("a", 1, 1), _count("a", 2, 2), _count("a", 3, 3),
                              _count("b", 1, 1), _count("b", 2, 2), _count("c", 1, 1),
                              _count("e", 1, 1)])
        await publish_model(system, config, build_job_model(config, {"local.words": 2}, None))

    on_system(config, build)
    return path


def test_verify_counts_matched_missing_extra_and_wrong_keys(spark: Any, job: Path) -> None:
    report = verify_job(job, spark)

    assert (report.matched, report.missing, report.extra, report.wrong) == (2, 1, 1, 1)
    assert report.examples == {
        "missing": ["d: expected 1, store None, last_output None"],
        "extra": ["e: expected None, store 1, last_output 1"],
        "wrong": ["c: expected 1, store 5, last_output 1"],
    }
    assert not report.exact


def test_verify_refuses_a_job_without_a_verifier(spark: Any, tmp_path: Path) -> None:
    path = wordcount_job(tmp_path / "wordcount")
    path.write_text(path.read_text().replace("wordcount_task:WordCountTask",
                                             "wordcount_task:OtherTask"))

    with pytest.raises(VerificationError, match=re.escape(
            "no Spark verifier for job.task = 'wordcount_task:OtherTask'")):
        verify_job(path, spark)


def test_sampan_verify_prints_json_and_exits_1_when_not_exact(
        spark: Any, job: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["verify", str(job), "--json"])

    report = json.loads(capsys.readouterr().out)
    assert status == 1
    assert {k: report[k] for k in ("job", "exact", "matched", "missing", "extra", "wrong")} == {
        "job": "wordcount", "exact": False, "matched": 2, "missing": 1, "extra": 1, "wrong": 1}
