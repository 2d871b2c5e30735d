"""The bearer token of a job's query endpoints, from the environment or a file, as a
`framework.secrets.Secret` so no log line, error or status output can show it."""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from framework.config import QueriesConfig
from framework.secrets import Secret, expand_references, read_secret_file

__all__ = ["authorized", "query_token"]


def query_token(config: QueriesConfig, environ: Mapping[str, str] | None = None
                ) -> Secret | None:
    """``[queries]``'s token (``token = "${NAME}"`` or ``token_file``), None when unset;
    a `ConfigError` naming the key — never the value — when it cannot be read."""
    if config.token is not None:
        return Secret(expand_references(config.token, "queries.token", environ))
    if config.token_file is not None:
        return Secret(read_secret_file(config.token_file, "queries.token_file"))
    return None


def authorized(token: Secret | None, header: str | None) -> bool:
    """Whether an ``Authorization`` header carries ``token`` (any request when None);
    compared in constant time."""
    if token is None:
        return True
    scheme, _, given = (header or "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(
        given.strip().encode(), token.reveal().encode())
