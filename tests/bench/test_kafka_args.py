"""Benches against a given cluster take its connection settings from a file, and write
them into their job files as a job's kafka system takes them."""

from __future__ import annotations

import argparse
import tomllib
from pathlib import Path

import pytest

from bench.kafka_args import add_client_options, client_options, job_line
from framework.errors import ConfigError
from framework.systems.kafka.options import KafkaOptions


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_client_options(parser)
    return parser.parse_args(list(argv))


def test_a_client_options_file_becomes_the_job_files_options(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    monkeypatch.setenv("SAMPAN_TEST_BENCH_PW", "pw")
    (tmp_path / "pw").write_text("from-file\n")
    path = tmp_path / "kafka.toml"
    path.write_text('security_protocol = "SASL_PLAINTEXT"\nsasl_mechanism = "PLAIN"\n'
                    'sasl_plain_username = "alice"\nsasl_plain_password_file = "pw"\n'
                    "timeout_s = 3\n")
    options = client_options(_parse("--client-options", str(path)))
    assert options["sasl_plain_password_file"] == str(tmp_path / "pw")  # made absolute
    table = tomllib.loads("[s]\n" + job_line(options))["s"]["client_options"]
    assert table == options
    kwargs = KafkaOptions.from_mapping("kafka", table).client_kwargs("127.0.0.1:9")
    assert kwargs["sasl_plain_password"] == "from-file"
    assert client_options(_parse()) == {} and job_line({}) == ""


def test_a_file_that_cannot_work_is_named(tmp_path: Path) -> None:
    path = tmp_path / "kafka.toml"
    path.write_text('security_protocol = "SASL_SSL"\nsasl_mechanism = "GSSAPI"\n')
    with pytest.raises(ConfigError, match=f"--client-options {path}: .*GSSAPI"):
        client_options(_parse("--client-options", str(path)))
