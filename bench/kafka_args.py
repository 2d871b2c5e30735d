"""``--client-options FILE`` for benches that run against a given Kafka cluster: the same
connection settings (TLS, SASL) a job's kafka system takes, for the job files the bench
writes (`framework.systems.kafka.options`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from framework.systems.kafka.options import read_client_options, toml_inline

__all__ = ["add_client_options", "client_options", "job_line"]


def add_client_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--client-options", type=Path, metavar="FILE",
                        help="with --bootstrap: a TOML file of the cluster's client_options "
                        "(security_protocol, sasl_*, ssl_*: docs/security.md)")


def client_options(args: argparse.Namespace) -> dict[str, Any]:
    """The options of ``--client-options`` ({} without it)."""
    path = getattr(args, "client_options", None)
    return {} if path is None else read_client_options(path)


def job_line(options: dict[str, Any]) -> str:
    """The ``client_options = {…}`` line of a job file's kafka system ("" without)."""
    return f"client_options = {toml_inline(options)}\n" if options else ""

