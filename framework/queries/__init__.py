"""Interactive queries: read any key's state from outside the job, answered by the task
that owns it (docs/queries.md). `Client` and `SyncClient` (`framework.queries.client`)
are the Python API; each worker's endpoint is `framework.queries.server.QueryServer`.

The package imports nothing up front: a worker of a job without queries never loads
aiohttp (`framework.queries.hook`)."""

from __future__ import annotations

from typing import Any

__all__ = ["Answer", "Client", "Page", "SyncClient"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from framework.queries import client

        return getattr(client, name)
    raise AttributeError(f"module 'framework.queries' has no attribute {name!r}")
