"""One host process per state folder: an exclusive lock file naming the holder.

A second `sampan run --host` on the same machine and state folder is refused here, before
it opens a store or joins the job's group (it would read stores the running host's workers
write and cost the whole job two rebalances). The lock is an ``flock`` on
``<state folder>/host.lock``: the kernel drops it when the holder dies, so a crashed host
never leaves a stale lock behind. Duplicates on other machines are refused by the group
leader instead (`framework.hosts.host`).
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from framework.hosts.errors import DuplicateHostError

__all__ = ["HostLock"]

LOCK_FILE = "host.lock"


class HostLock:
    """The exclusive lock of a state folder, held from `acquire` until `release`."""

    def __init__(self, state_dir: Path, job: str, host: str) -> None:
        self.path = state_dir / LOCK_FILE
        self.job = job
        self.host = host
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock, or raise `DuplicateHostError` naming the running holder."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)  # not inherited by workers
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 200).decode(errors="replace").split()
            os.close(fd)
            raise DuplicateHostError(self._refusal(holder)) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} {self.host}\n".encode())
        self._fd = fd

    def _refusal(self, holder: list[str]) -> str:
        pid = holder[0] if holder else "unknown"
        name = holder[1] if len(holder) > 1 else "?"
        folder = self.path.parent
        if name == self.host:
            return (f"host {self.host!r} of job {self.job!r} already runs on this machine "
                    f"(pid {pid}) with state folder {folder}; stop that one first (kill "
                    f"{pid}), or give this host another --host name and its own --data-dir")
        return (f"state folder {folder} of job {self.job!r} is in use by host {name!r} (pid "
                f"{pid}) on this machine; give host {self.host!r} its own --data-dir")

    def release(self) -> None:
        """Drop the lock (the file stays; the next holder rewrites it)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
