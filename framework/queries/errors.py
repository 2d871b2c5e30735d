"""The errors of interactive queries: each says which store, key or task and what to do."""

from __future__ import annotations

from framework.errors import SampanError

__all__ = [
    "EndpointUnreachableError",
    "NotQueryableError",
    "QueryAuthError",
    "QueryError",
    "TaskUnavailableError",
]


class QueryError(SampanError):
    """A query could not be answered; the message names the store or key and the fix."""

    status = 400
    """The HTTP status an endpoint answers it with."""


class NotQueryableError(QueryError):
    """The store does not say how its keys are partitioned (``keyed_by``), or the job has
    no such store: answering from any one task could be wrong, so the query is refused."""

    status = 404


class QueryAuthError(QueryError):
    """The request has no bearer token, or the wrong one."""

    status = 401


class TaskUnavailableError(QueryError):
    """The key's task is moving or restoring, or its endpoint cannot be reached: retry
    after `retry_after_ms` — never an empty or old answer meanwhile."""

    status = 503

    def __init__(self, message: str, retry_after_ms: int) -> None:
        super().__init__(message)
        self.retry_after_ms = retry_after_ms


class EndpointUnreachableError(QueryError):
    """No query endpoint of the job answers (the job is not running, or queries are off)."""

    status = 503
