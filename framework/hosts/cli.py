"""`sampan run JOB --host NAME [--data-dir DIR]`: check the arguments, run the host."""

from __future__ import annotations

import asyncio
import re
import signal
from pathlib import Path

from framework.config import JobConfig
from framework.errors import ConfigError
from framework.hosts.errors import HostsUnsupportedError

__all__ = ["check_host_arguments", "run_host"]

HOST_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def check_host_arguments(config: JobConfig, host: str | None, data_dir: str | None) -> None:
    """Raise naming the problem and the fix when ``--host``/``--data-dir`` cannot be used."""
    if host is None:
        raise ConfigError("--data-dir is for a host of a job on several hosts; add --host "
                          "NAME, or set job.data_dir in the job file")
    if not HOST_NAME.fullmatch(host):
        raise ConfigError(f"--host {host!r}: a host name is letters, digits, '_', '.' and "
                          "'-', starting with a letter or digit")
    meta = config.system(config.metadata_system)
    if meta.type != "kafka":
        raise HostsUnsupportedError(
            f"--host {host}: job {config.name!r} keeps its metadata on the {meta.type!r} "
            f"system {meta.name!r}, which lives on one machine, so the job cannot span "
            f"hosts; run it without --host (one host), or set job.metadata_system to a "
            f"kafka system to run it on several hosts")


def run_host(config: JobConfig, host: str | None, data_dir: str | None,
             worker_logs: str | None, log_format: str = "text") -> int:
    """Run host ``host`` of the job in the foreground until SIGTERM/SIGINT.

    Logs as ``log_format`` (text or json, passed on to the workers through the environment).
    """
    from framework.hosts.config import host_config
    from framework.hosts.host import Host
    from framework.logformat import configure_logging

    check_host_arguments(config, host, data_dir)
    assert host is not None
    local = host_config(config, Path(data_dir) if data_dir else None)
    configure_logging(log_format, process=f"host-{host}", job=config.name)

    async def main() -> int:
        runner = Host(local, host, log_dir=Path(worker_logs) if worker_logs else None)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, runner.stop.set)
        await runner.run()
        return 0

    return asyncio.run(main())
