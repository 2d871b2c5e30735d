"""``[metrics]`` in the job file: defaults, the port scheme, and errors naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from framework.config import MetricsConfig, parse_config
from framework.errors import ConfigError

JOB = {
    "job": {"name": "m", "task": "t:T", "inputs": ["local.events"], "workers": 3},
    "systems": {"local": {"type": "local"}},
    "streams": {"local.events": {}},
}


def config_with(metrics: dict[str, object]) -> MetricsConfig:
    return parse_config({**JOB, "metrics": metrics}, Path("/jobs/m.toml")).metrics


def test_defaults_serve_every_process_on_a_free_local_port() -> None:
    metrics = parse_config(JOB, Path("/jobs/m.toml")).metrics
    assert metrics == MetricsConfig(enabled=True, bind="127.0.0.1", port=0,
                                    lag_interval_ms=1000)
    assert [metrics.worker_port(w) for w in range(3)] == [0, 0, 0]


def test_a_base_port_gives_the_coordinator_it_and_worker_i_the_next_ones() -> None:
    metrics = config_with({"port": 9400, "bind": "0.0.0.0"})
    assert (metrics.port, [metrics.worker_port(w) for w in range(3)]) == (9400,
                                                                         [9401, 9402, 9403])


def test_metrics_settings_survive_the_configuration_snapshot() -> None:
    config = parse_config({**JOB, "metrics": {"enabled": False, "port": 9500}},
                          Path("/jobs/m.toml"))
    assert parse_config(config.to_dict(), config.path).metrics == config.metrics


@pytest.mark.parametrize(("metrics", "message"), [
    ({"port": 70000}, 'metrics.port: expected a port from 0 to 65535 (0: any free port), '
                      'got 70000'),
    ({"port": 65534}, "metrics.port: workers use ports 65535..65537, past 65535; choose a "
                      "port ≤ 65532, or 0 for free ports"),
    ({"bind": "localhost"}, 'metrics.bind: expected an IP address such as "127.0.0.1" or '
                            '"0.0.0.0", got "localhost"'),
    ({"enabled": "yes"}, 'metrics.enabled: expected true or false, got "yes"'),
    ({"prot": 1}, 'metrics.prot: unknown key; did you mean "port"?'),
])
def test_errors_name_the_key_and_the_fix(metrics: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        config_with(metrics)
    assert str(raised.value) == f"/jobs/m.toml: {message}"
