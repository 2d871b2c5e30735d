"""A job file naming a pipeline loads as an ordinary task job: the compiled task, the
pipeline's sources and intermediate streams as inputs, those streams and its stores
declared (the file's own keys win), and every mistake one line naming the operator."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from framework.commands.acls import job_acls
from framework.config import load_config, parse_config
from framework.config.pipeline import PIPELINE_TASK
from framework.errors import ConfigError
from framework.pipelines.task import PipelineTask

PIPELINE = """\
from framework.pipelines import Pipeline
from framework.windows import Tumbling, count


def build():
    p = Pipeline()
    views = p.source("local.views")
    by_page = views.partition_by(lambda user, view: view["page"], name="by-page")
    by_page.count(store="views").to("local.views-per-page")
    by_page.window(Tumbling(size_ms=60000), count(), store="minutes").to("local.minutes")
    return p
"""

JOB = """\
[job]
name = "pages"
pipeline = "views_pipeline:build"

[systems.local]
type = "local"

[streams."local.views"]
partitions = 4
key_serde = "string"

[streams."local.views-per-page"]

[streams."local.minutes"]
"""


def job(tmp_path: Path, pipeline: str = PIPELINE, text: str = JOB) -> Path:
    (tmp_path / "views_pipeline.py").write_text(textwrap.dedent(pipeline))
    path = tmp_path / "job.toml"
    path.write_text(text)
    return path


def error(tmp_path: Path, pipeline: str = PIPELINE, text: str = JOB) -> str:
    with pytest.raises(ConfigError) as caught:
        load_config(job(tmp_path, pipeline, text))
    return str(caught.value)


def test_a_pipeline_job_loads_as_a_task_job_with_its_inputs_streams_and_stores(
        tmp_path: Path) -> None:
    config = load_config(job(tmp_path))
    intermediate = "local.pages-by-page-repartition"
    assert config.task == PIPELINE_TASK
    assert config.pipeline == "views_pipeline:build"
    assert config.inputs == ("local.views", intermediate)
    assert config.intermediate_streams == (intermediate,)
    stream = config.streams[intermediate]
    assert (stream.partitions, stream.key_serde, stream.value_serde, stream.retention_ms,
            stream.compacted) == (4, "string", "json", 3_600_000, False)
    assert sorted(config.stores) == ["minutes", "views"]
    assert all(s.changelog and s.type == "rocksdb" for s in config.stores.values())
    assert config.changelog_stream("views") == "local.pages-views-changelog"
    assert config.stateful


def test_the_compiled_task_is_the_pipeline_task_class() -> None:
    module, _, name = PIPELINE_TASK.partition(":")
    assert (PipelineTask.__module__, PipelineTask.__name__) == (module, name)


def test_what_the_file_declares_of_an_intermediate_stream_or_a_store_wins(
        tmp_path: Path) -> None:
    config = load_config(job(tmp_path, text=JOB + textwrap.dedent("""
        [streams."local.pages-by-page-repartition"]
        partitions = 8
        retention_ms = 60000

        [stores.views]
        type = "memory"
        """)))
    stream = config.streams["local.pages-by-page-repartition"]
    assert (stream.partitions, stream.retention_ms) == (8, 60000)
    assert config.stores["views"].type == "memory"
    assert config.stores["minutes"].type == "rocksdb"


def test_the_configuration_a_running_job_keeps_loads_back_the_same(tmp_path: Path) -> None:
    config = load_config(job(tmp_path))
    again = parse_config(config.to_dict(), config.path)
    assert again == config
    assert again.digest == config.digest


def test_inputs_may_name_the_sources_and_nothing_else(tmp_path: Path) -> None:
    config = load_config(job(tmp_path, text=JOB.replace(
        'pipeline = "views_pipeline:build"',
        'pipeline = "views_pipeline:build"\ninputs = ["local.views"]')))
    assert config.inputs == ("local.views", "local.pages-by-page-repartition")
    assert error(tmp_path, text=JOB.replace(
        'pipeline = "views_pipeline:build"',
        'pipeline = "views_pipeline:build"\ninputs = ["local.minutes"]')) == (
        f"{tmp_path / 'job.toml'}:4: job.inputs: a pipeline reads local.views, "
        'local.pages-by-page-repartition; remove inputs (got ["local.minutes"])')


def test_a_job_with_both_task_and_pipeline_is_refused(tmp_path: Path) -> None:
    assert error(tmp_path, text=JOB.replace('name = "pages"',
                                            'name = "pages"\ntask = "mine:Task"')) == (
        f"{tmp_path / 'job.toml'}:3: job.task: a pipeline job runs its compiled pipeline, "
        "not a task of its own: remove task (or pipeline, to run the task)")


def test_a_pipeline_that_does_not_import_is_named_with_its_key(tmp_path: Path) -> None:
    message = error(tmp_path, text=JOB.replace("views_pipeline:build", "views_pipeline:biuld"))
    assert message.startswith(f"{tmp_path / 'job.toml'}:3: job.pipeline: module "
                              '"views_pipeline"')
    assert message.endswith('has no attribute "biuld"; did you mean "views_pipeline:build"?')


def test_a_build_function_returning_something_else_is_refused(tmp_path: Path) -> None:
    assert error(tmp_path, "def build():\n    return 42\n").endswith(
        "job.pipeline: views_pipeline:build() returned int, not a "
        "framework.pipelines.Pipeline; return the Pipeline it builds")


@pytest.mark.parametrize(("body", "message"), [
    ('p.source("local.clicks").to("local.minutes")',
     "source('local.clicks') at views_pipeline.py:5: stream local.clicks is not declared; "
     'add a [streams."local.clicks"] table to the job file'),
    ('p.source("local.views").to("local.nowhere")',
     "to('local.nowhere') at views_pipeline.py:5: stream local.nowhere is not declared; add "
     'a [streams."local.nowhere"] table to the job file'),
    ('p.source("views").to("nowhere")',
     "to('nowhere') at views_pipeline.py:5: stream nowhere is not declared; add "
     'a [streams."<system>.nowhere"] table to the job file'),
    ('p.source("views").to("elsewhere")',
     "to('elsewhere') at views_pipeline.py:5: stream 'elsewhere' is declared in several "
     "systems (kafka.elsewhere, local.elsewhere); name it with its system, e.g. "
     "'kafka.elsewhere'"),
    ('p.source("local.views").map(lambda k, v: (v, k)).count(store="c").to("local.minutes")',
     "count('c') at views_pipeline.py:5 keeps state per key, but map() at "
     "views_pipeline.py:5 may have changed the keys, so records of one key can be on "
     "several tasks; re-key with .partition_by(..., name=...) before it (or use map_values / "
     "process(..., same_keys=True) when the key stays)"),
    ('s = p.source("local.views")\n    s.count(store="c").to("local.minutes")\n'
     '    s.reduce(max, store="c").to("local.minutes")',
     "reduce('c') at views_pipeline.py:7: store 'c' is already used by count('c') at "
     "views_pipeline.py:6; give each operator its own"),
    ('p.source("local.views").join(p.source("local.minutes"), max, before_ms=0, after_ms=0, '
     'store="j").to("local.views-per-page")',
     "join('j') at views_pipeline.py:5 needs co-partitioned streams (every key in the same "
     "partition number of both), but local.views has 4, local.minutes has 2 partitions in the "
     "job file; give them the same count (an intermediate stream: partitions = N in its "
     "[streams] table)"),
    ('p.source("local.views").partition_by(lambda k, v: v, name="by page")',
     "partition_by(name='by page') at views_pipeline.py:5: name the intermediate stream with "
     "letters, digits, '_', '.' and '-' (it is part of the stream's name)"),
    ('p.source("local.views").to("local.views")',
     "to('local.views') at views_pipeline.py:5 writes to local.views, which the pipeline "
     "reads (source('local.views') at views_pipeline.py:5); write to another stream"),
    ('p.source("local.views").partition_by(lambda k, v: v, name="x").window(Tumbling('
     'size_ms=10), count(), store="w", event_time="markers")',
     "window('w') at views_pipeline.py:5: event_time='markers' closes by the watermark "
     "records producers write into a source, but it reads local.pages-x-repartition, which "
     "carries none; use event_time='records' there"),
])
def test_a_pipeline_that_cannot_run_as_declared_fails_to_load_naming_the_operator(
        tmp_path: Path, body: str, message: str) -> None:
    pipeline = ("from framework.pipelines import Pipeline\n"
                "from framework.windows import Tumbling, count\n"
                "def build():\n    p = Pipeline()\n"
                f"    {body}\n    return p\n")
    text = JOB.replace('[streams."local.minutes"]',
                       '[streams."local.minutes"]\npartitions = 2') + (
        '\n[systems.kafka]\ntype = "kafka"\nbootstrap = "127.0.0.1:9092"\n\n'
        '[streams."local.elsewhere"]\n\n[streams."kafka.elsewhere"]\n')
    assert error(tmp_path, pipeline, text) == (
        f"{tmp_path / 'job.toml'}:3: job.pipeline: {message}")


def test_a_stream_named_without_its_system_is_the_one_the_job_file_declares(
        tmp_path: Path) -> None:
    """So one pipeline runs on the local log and on Kafka (the drill renames the file's
    streams, not the code's)."""
    unqualified = PIPELINE.replace('"local.', '"')
    config = load_config(job(tmp_path, unqualified, JOB))
    assert config.inputs == ("local.views", "local.pages-by-page-repartition")
    kafka = kafka_job(tmp_path)
    (tmp_path / "views_pipeline.py").write_text(unqualified)
    assert load_config(kafka).inputs == ("kafka.views", "kafka.pages-by-page-repartition")


def test_an_intermediate_stream_with_no_partition_count_to_take_must_be_declared(
        tmp_path: Path) -> None:
    assert error(tmp_path, text=JOB.replace("partitions = 4\n", "")).endswith(
        "job.pipeline: partition_by(name='by-page') at views_pipeline.py:8: the streams it "
        "re-keys declare no partitions, so local.pages-by-page-repartition has no partition "
        'count; add partitions = N to [streams."local.pages-by-page-repartition"] in the job '
        "file")


def kafka_job(tmp_path: Path, options: str = "") -> Path:
    text = JOB.replace('[systems.local]\ntype = "local"',
                       f'[systems.kafka]\ntype = "kafka"\nbootstrap = "127.0.0.1:9092"\n{options}')
    return job(tmp_path, PIPELINE.replace("local.", "kafka."), text.replace("local.", "kafka."))


def test_on_kafka_workers_read_partition_counts_at_every_commit_unless_the_file_says(
        tmp_path: Path) -> None:
    config = load_config(kafka_job(tmp_path))
    assert config.systems["kafka"].client_options == {"metadata_max_age_s": 0}
    assert config.streams["kafka.pages-by-page-repartition"].retention_ms is None
    config = load_config(kafka_job(tmp_path, "client_options = { metadata_max_age_s = 2.5 }"))
    assert config.systems["kafka"].client_options == {"metadata_max_age_s": 2.5}


def test_the_acls_of_a_pipeline_job_let_it_write_its_intermediate_streams(
        tmp_path: Path) -> None:
    rules = {(r.name, r.operations) for r in job_acls(load_config(kafka_job(tmp_path)))["kafka"]
             if r.resource == "TOPIC" and r.pattern == "LITERAL"}
    assert ("pages-by-page-repartition", ("READ", "WRITE")) in rules
    assert ("views", ("READ",)) in rules
    assert ("views-per-page", ("WRITE",)) in rules
