"""`sampan acls JOB`: the Kafka ACLs the job needs, as a table and as kafka-acls commands.

Reads only the job file (no broker, no secret): an operator runs it before the job has any
right on the cluster.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from typing import Any

from framework.commands.jobarg import add_job_argument
from framework.config import JobConfig
from framework.errors import SampanError
from framework.secrets import expand_references
from framework.systems.kafka.acls import AclRule, JobFootprint, acl_rules, kafka_acls_command

__all__ = ["add_acls_command", "job_acls"]


def add_acls_command(commands: Any) -> None:
    """Register `sampan acls` on the CLI's subparsers."""
    parser = commands.add_parser(
        "acls", help="print the Kafka ACLs a job needs (a table and kafka-acls commands)",
        description="List every ACL the job's principal needs on each Kafka system of the job "
        "file: its input and output topics, its changelogs, its internal topics and groups, "
        "and under exactly-once its transactional ids (docs/security.md). Rules marked "
        "'when' are needed only then. Needs no broker and no secret.")
    add_job_argument(parser)
    parser.add_argument("--principal", metavar="PRINCIPAL",
                        help="the job's principal, e.g. User:alice (default: User:<the "
                        "system's sasl_plain_username>)")
    parser.add_argument("--json", action="store_true",
                        help="print the rules as JSON, one object per system")
    parser.set_defaults(handler=_command)


def job_acls(config: JobConfig) -> dict[str, list[AclRule]]:
    """Kafka system name → the rules ``config``'s job needs there."""
    found = {}
    for name, system in sorted(config.systems.items()):
        if system.type != "kafka":
            continue
        streams = [s for s in config.streams.values() if s.system == name]
        inputs = {config.streams[q].stream for q in (*config.inputs, *config.broadcast_inputs)
                  if config.streams[q].system == name}
        metadata = config.metadata_system == name
        changelogs = {config.changelog_ref(store).stream for store in config.logged_stores}
        internal = {config.coordinator_ref.stream} | changelogs
        footprint = JobFootprint(
            job=config.name,
            namespace=_option(system.client_options, "namespace", name),
            inputs=sorted(inputs),
            outputs=sorted(s.stream for s in streams if s.stream not in internal and (
                s.stream not in inputs or s.qualified in config.intermediate_streams)),
            created_if_missing=sorted(s.stream for s in streams if s.partitions is not None),
            changelogs=sorted(changelogs) if metadata else [],
            metadata=metadata,
            exactly_once=config.guarantee == "exactly-once")
        found[name] = acl_rules(footprint)
    return found


def _option(options: Mapping[str, Any], key: str, system: str) -> str:
    value = options.get(key, "")
    return expand_references(value, f"[systems.{system}.client_options] {key}") if (
        isinstance(value, str)) else ""


def _principal(config: JobConfig, system: str, given: str | None) -> str:
    if given:
        return given
    options = config.systems[system].client_options
    user = _option(options, "sasl_plain_username", system)
    mechanism = str(options.get("sasl_mechanism", "PLAIN")).upper()
    if user and mechanism != "OAUTHBEARER":
        return f"User:{user}"
    return "User:<principal>"


def _command(args: argparse.Namespace) -> int:
    from framework.config import load_config

    config = load_config(args.job)
    rules = job_acls(config)
    if not rules:
        raise SampanError(f"job {config.name!r} uses no Kafka system ({args.job}): the local "
                          "log has no ACLs")
    if args.json:
        print(json.dumps([{
            "system": system, "bootstrap": config.systems[system].bootstrap,
            "principal": _principal(config, system, args.principal),
            "acls": [{"resource": r.resource, "pattern": r.pattern, "name": r.name,
                      "operations": list(r.operations), "why": r.why, "when": r.when or None}
                     for r in system_rules]}
            for system, system_rules in rules.items()], indent=1))
        return 0
    for system, system_rules in rules.items():
        principal = _principal(config, system, args.principal)
        bootstrap = config.systems[system].bootstrap or "HOST:PORT"
        print(f"ACLs of job {config.name!r} on Kafka system {system!r} ({bootstrap}) for "
              f"{principal}:\n")
        print(_table(system_rules))
        if principal.endswith("<principal>"):
            print("\n(give --principal: the principal the broker maps this system's client "
                  "certificate or OAUTHBEARER token to)")
        print("\nAs kafka-acls commands (admin.properties: your admin client's settings):\n")
        for rule in system_rules:
            print(kafka_acls_command(rule, principal, bootstrap))
        print()
    return 0


def _table(rules: list[AclRule]) -> str:
    rows = [("RESOURCE", "PATTERN", "NAME", "OPERATIONS", "WHEN", "WHY")]
    rows += [(r.resource, r.pattern, r.name, ",".join(r.operations), r.when or "always",
              r.why) for r in rules]
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row[:5], widths,
                                                                         strict=True))
                     + "  " + row[5] for row in rows)
