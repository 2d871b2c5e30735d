"""HTTP of the query endpoints: request parameters read and checked, JSON answers and
errors (503 with ``Retry-After``), and another endpoint's answer relayed."""

from __future__ import annotations

import math
from typing import Any

import orjson
from aiohttp import web

from framework.queries.errors import QueryError, TaskUnavailableError
from framework.queries.reads import CONSISTENCIES, Consistency
from framework.queries.wire import from_b64, to_wire

__all__ = ["DEFAULT_LIMIT", "MAX_LIMIT", "after_of", "b64_param", "body_of", "consistency_of",
           "error_response", "json_response", "limit_of", "relayed"]

MAX_LIMIT = 10_000
DEFAULT_LIMIT = 100


def consistency_of(request: web.Request) -> Consistency:
    value = request.query.get("consistency", "committed")
    for known in CONSISTENCIES:
        if value == known:
            return known
    raise QueryError(f"consistency {value!r} is not one of {', '.join(CONSISTENCIES)}")


def limit_of(request: web.Request) -> int:
    text = request.query.get("limit", str(DEFAULT_LIMIT))
    try:
        limit = int(text)
    except ValueError:
        limit = 0
    if not 1 <= limit <= MAX_LIMIT:
        raise QueryError(f"limit {text!r} must be an integer from 1 to {MAX_LIMIT}")
    return limit


def after_of(request: web.Request) -> bytes | None:
    return b64_param(request, "after")


def b64_param(request: web.Request, name: str) -> bytes | None:
    text = request.query.get(name)
    return None if text is None else from_b64(text, name)


def json_response(document: Any, status: int = 200) -> web.Response:
    return web.Response(body=to_wire(document), status=status,
                        content_type="application/json")


def error_response(error: QueryError) -> web.Response:
    document: dict[str, Any] = {"error": str(error), "status": error.status}
    if not isinstance(error, TaskUnavailableError):
        return json_response(document, error.status)
    document["retry_after_ms"] = error.retry_after_ms
    response = json_response(document, error.status)
    response.headers["Retry-After"] = str(math.ceil(error.retry_after_ms / 1000))
    return response


def body_of(answer: web.Response) -> bytes:
    body = answer.body
    return body if isinstance(body, bytes) else b""


def relayed(answer: web.Response) -> QueryError:
    """Another endpoint's error answer as this endpoint's."""
    try:
        document = orjson.loads(body_of(answer))
        message = str(document["error"])
        retry = int(document.get("retry_after_ms", 1000))
    except (ValueError, KeyError, TypeError):
        message, retry = f"another endpoint answered {answer.status}", 1000
    if answer.status == 503:
        return TaskUnavailableError(message, retry)
    error = QueryError(message)
    error.status = answer.status
    return error
