"""One process per state folder: an exclusive lock file naming the holder.

A second `sampan run` (with or without ``--host``) on the same machine and state folder is
refused here, before it opens a store, joins a group or takes the job's lease: it would
read stores the running one's workers write. The lock is an ``flock`` on
``<state folder>/host.lock``: the kernel drops it when the holder dies, so a crashed run
never leaves a stale lock behind. Duplicates on other machines are refused by the group
leader (hosts, `framework.hosts.host`) or the job's coordinator lease (one-host runs).
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from framework.hosts.errors import DuplicateHostError, StateFolderBusyError

__all__ = ["HostLock"]

LOCK_FILE = "host.lock"
ONE_HOST = "-"
"""The holder name a one-host `sampan run` (no ``--host``) writes."""


class HostLock:
    """The exclusive lock of a state folder, held from `acquire` until `release`, by host
    ``host`` of a job or (``host=None``) by a one-host `sampan run`."""

    def __init__(self, state_dir: Path, job: str, host: str | None = None) -> None:
        self.path = state_dir / LOCK_FILE
        self.job = job
        self.host = host
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock, or raise `DuplicateHostError` / `StateFolderBusyError` naming the
        running holder and what to do."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)  # not inherited by workers
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 200).decode(errors="replace").split()
            os.close(fd)
            raise self._refusal(holder) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} {self.host or ONE_HOST}\n".encode())
        self._fd = fd

    def _refusal(self, holder: list[str]) -> Exception:
        pid = holder[0] if holder else "unknown"
        name = holder[1] if len(holder) > 1 else "?"
        folder = self.path.parent
        if self.host is None:
            if name == ONE_HOST:
                return StateFolderBusyError(
                    f"job {self.job!r} already runs on this machine with state folder "
                    f"{folder} (sampan run, pid {pid}); stop that one first (Ctrl-C in its "
                    f"terminal, or kill {pid}: its workers commit and stop), then run again")
            return StateFolderBusyError(
                f"state folder {folder} of job {self.job!r} is in use by host {name!r} "
                f"(pid {pid}) on this machine; a job runs either as hosts (--host) or as one "
                f"sampan run: stop the hosts first (kill {pid}), or run this one as a host "
                f"with --host NAME --data-dir DIR")
        if name == self.host:
            return DuplicateHostError(
                f"host {self.host!r} of job {self.job!r} already runs on this machine "
                f"(pid {pid}) with state folder {folder}; stop that one first (kill "
                f"{pid}), or give this host another --host name and its own --data-dir")
        if name == ONE_HOST:
            return StateFolderBusyError(
                f"state folder {folder} of job {self.job!r} is in use by a one-host sampan "
                f"run (pid {pid}) on this machine; a job runs either as one sampan run or as "
                f"hosts: stop it first (kill {pid}), or give host {self.host!r} its own "
                f"--data-dir")
        return StateFolderBusyError(
            f"state folder {folder} of job {self.job!r} is in use by host {name!r} (pid "
            f"{pid}) on this machine; give host {self.host!r} its own --data-dir")

    def release(self) -> None:
        """Drop the lock (the file stays; the next holder rewrites it)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
