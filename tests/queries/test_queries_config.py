"""The job file's [queries] table and the stores' keyed_by / key_to_input: defaults,
the token's two sources (never its value in a message), and refusals naming the fix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from framework.config import JobConfig, QueriesConfig, parse_config
from framework.errors import ConfigError
from framework.queries.auth import authorized, query_token
from framework.secrets import Secret


def document(queries: dict[str, Any] | None = None, **store: Any) -> dict[str, Any]:
    return {"job": {"name": "wc", "task": "m:T", "inputs": ["local.words"], "workers": 2},
            "systems": {"local": {"type": "local"}},
            "streams": {"local.words": {}, "local.counts": {}},
            "stores": {"counts": store},
            **({"queries": queries} if queries is not None else {})}


@pytest.fixture(autouse=True)
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # messages name the job file as given: job.toml


def config_of(tmp_path: Path, queries: dict[str, Any] | None = None, **store: Any
              ) -> JobConfig:
    return parse_config(document(queries, **store), "job.toml")


def error_of(tmp_path: Path, queries: dict[str, Any] | None = None, **store: Any) -> str:
    with pytest.raises(ConfigError) as caught:
        config_of(tmp_path, queries, **store)
    return str(caught.value)


def test_queries_are_off_and_bound_to_loopback_by_default(tmp_path: Path) -> None:
    queries = config_of(tmp_path).queries
    assert queries == QueriesConfig()
    assert (queries.enabled, queries.bind, queries.port, queries.token,
            queries.token_file) == (False, "127.0.0.1", 0, None, None)


def test_a_fixed_port_gives_worker_i_port_plus_i(tmp_path: Path) -> None:
    queries = config_of(tmp_path, {"enabled": True, "port": 9400}).queries
    assert [queries.worker_port(w) for w in range(3)] == [9400, 9401, 9402]
    assert QueriesConfig().worker_port(1) == 0


def test_worker_ports_past_65535_are_refused(tmp_path: Path) -> None:
    assert error_of(tmp_path, {"port": 65535}) == (
        "job.toml: queries.port: workers use ports 65535..65536, past 65535; choose a port "
        "≤ 65534, or 0 for free ports")


def test_a_token_written_in_the_job_file_is_refused_without_showing_it(
        tmp_path: Path) -> None:
    message = error_of(tmp_path, {"token": "s3cret-value"})
    assert "s3cret" not in message
    assert message == (
        'job.toml: queries.token: expected an environment reference "${NAME}" (the value is '
        "not shown: it may be the secret); keep the secret out of the job file: export it "
        'as NAME and write token = "${NAME}", or name a file holding it with token_file')


def test_the_token_comes_from_the_environment_variable_it_names(tmp_path: Path) -> None:
    config = config_of(tmp_path, {"token": "${WC_QUERY_TOKEN}"})
    assert config.to_dict()["queries"]["token"] == "${WC_QUERY_TOKEN}"
    token = query_token(config.queries, {"WC_QUERY_TOKEN": "s3cret"})
    assert token == Secret("s3cret")
    assert "s3cret" not in repr(token) and "s3cret" not in str(token)


def test_an_unset_token_variable_is_named_with_the_key(tmp_path: Path) -> None:
    config = config_of(tmp_path, {"token": "${WC_QUERY_TOKEN}"})
    with pytest.raises(ConfigError) as caught:
        query_token(config.queries, {})
    assert str(caught.value).startswith(
        "queries.token refers to the environment variable WC_QUERY_TOKEN, which is not set")


def test_the_token_file_is_relative_to_the_job_file(tmp_path: Path) -> None:
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "query-token").write_text("from-a-file\n")
    config = config_of(tmp_path, {"token_file": "secrets/query-token"})
    assert config.queries.token_file == tmp_path / "secrets" / "query-token"
    assert query_token(config.queries) == Secret("from-a-file")


def test_an_unreadable_token_file_names_the_key_and_path(tmp_path: Path) -> None:
    config = config_of(tmp_path, {"token_file": "missing"})
    with pytest.raises(ConfigError) as caught:
        query_token(config.queries)
    assert str(caught.value).startswith(
        f"queries.token_file = {str(tmp_path / 'missing')!r} cannot be read")


def test_token_and_token_file_together_are_refused(tmp_path: Path) -> None:
    assert error_of(tmp_path, {"token": "${T}", "token_file": "t"}) == (
        "job.toml: queries.token_file: set either token or token_file, not both")


def test_without_a_token_every_request_is_authorized() -> None:
    assert authorized(None, None)


def test_a_request_needs_the_bearer_token_when_one_is_set() -> None:
    token = Secret("s3cret")
    assert authorized(token, "Bearer s3cret")
    assert not authorized(token, None)
    assert not authorized(token, "Bearer wrong")
    assert not authorized(token, "Basic s3cret")


def test_keyed_by_names_an_input_of_the_job(tmp_path: Path) -> None:
    assert config_of(tmp_path, keyed_by="local.words").stores["counts"].keyed_by == (
        "local.words")
    assert error_of(tmp_path, keyed_by="local.counts") == (
        'job.toml: stores.counts.keyed_by: "local.counts" is not an input of the job; name '
        "one of job.inputs (local.words): the stream whose record keys this store's keys are")


def test_key_to_input_needs_keyed_by(tmp_path: Path) -> None:
    assert error_of(tmp_path, key_to_input="keys:word") == (
        'job.toml: stores.counts.key_to_input: only used with keyed_by; add keyed_by = '
        '"system.stream" (the input whose keys the function returns) or remove it')


def test_key_to_input_is_imported_at_load(tmp_path: Path) -> None:
    (tmp_path / "keys_at_load.py").write_text("def word(key):\n    return key.split('/')[1]\n"
                                               "NOT_A_FUNCTION = 3\n")
    config = config_of(tmp_path, keyed_by="local.words", key_to_input="keys_at_load:word")
    assert config.stores["counts"].key_to_input == "keys_at_load:word"
    message = error_of(tmp_path, keyed_by="local.words",
                       key_to_input="keys_at_load:NOT_A_FUNCTION")
    assert message == ("job.toml: stores.counts.key_to_input: keys_at_load:NOT_A_FUNCTION is "
                       "a int, not a function; name a function taking a store key and "
                       "returning the input's record key")
    assert "stores.counts.key_to_input" in error_of(
        tmp_path, keyed_by="local.words", key_to_input="no_such_module_here:word")


def test_every_queries_key_round_trips_through_to_dict(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("t\n")
    config = config_of(tmp_path, {
        "enabled": True, "bind": "0.0.0.0", "port": 9400, "advertised_host": "box-1",
        "token_file": "token", "forward_timeout_ms": 7, "retry_after_ms": 8},
        keyed_by="local.words")
    assert parse_config(config.to_dict(), "job.toml") == config


def test_a_job_without_queries_keeps_its_digest_and_enabling_them_changes_it(
        tmp_path: Path) -> None:
    plain = config_of(tmp_path)
    document = plain.to_dict()
    del document["queries"]
    assert plain.digest == parse_config(document, "job.toml").digest
    assert config_of(tmp_path, {"enabled": True}).digest != plain.digest
