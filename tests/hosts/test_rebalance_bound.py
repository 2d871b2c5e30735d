"""The bound on one rebalance wait (`framework.hosts.config.rebalance_wait_bound_ms`): the
configured ``coordinator.max_rebalance_wait_ms``, or by default the longest a sound round
takes (every member rejoining, the leader's model step, a session timeout)."""

from __future__ import annotations

from pathlib import Path

from hostjobs import job_file

from framework.config import load_config
from framework.hosts.config import lead_timeout_ms, rebalance_timeout_ms, rebalance_wait_bound_ms


def test_derived_from_the_timeouts_unless_configured(tmp_path: Path) -> None:
    config = load_config(job_file(tmp_path / "d", "127.0.0.1:9", "bound"))
    assert rebalance_timeout_ms(config) == 6000 + 5000 + 20000  # session + worker stop + 20 s
    assert lead_timeout_ms(config) == 6000 + 60000
    assert rebalance_wait_bound_ms(config) == 31000 + 66000 + 6000
    path = job_file(tmp_path / "c", "127.0.0.1:9", "bound")
    path.write_text(path.read_text().replace("[coordinator]\n",
                                             "[coordinator]\nmax_rebalance_wait_ms = 45000\n"))
    assert rebalance_wait_bound_ms(load_config(path)) == 45000
