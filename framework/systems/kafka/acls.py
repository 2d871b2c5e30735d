"""The Kafka ACLs a job needs: every topic, group and transactional id it touches, with
the operations it uses on each and why (`sampan acls`, docs/security.md).

Pure: the job's names in, rules out. A rule with ``when`` set is needed only then (the
first start creates the job's own topics; a stream the job creates when it is missing).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["AclRule", "JobFootprint", "acl_rules", "kafka_acls_command"]


@dataclass(frozen=True)
class AclRule:
    """Allow ``operations`` on one resource (or every resource whose name starts with
    ``name`` when ``pattern`` is PREFIXED)."""

    resource: str
    """TOPIC, GROUP, TRANSACTIONAL_ID or CLUSTER."""
    pattern: str
    """LITERAL or PREFIXED."""
    name: str
    operations: tuple[str, ...]
    why: str
    when: str = ""
    """Empty: always needed; else the only occasion that needs it."""


@dataclass(frozen=True)
class JobFootprint:
    """What one job does on one Kafka system (its names before the namespace)."""

    job: str
    namespace: str
    inputs: Sequence[str]
    outputs: Sequence[str]
    created_if_missing: Sequence[str]
    """Declared streams with ``partitions``: the job creates them when they do not exist."""
    changelogs: Sequence[str]
    metadata: bool
    """Whether this system is the job's metadata system (coordinator stream, checkpoints,
    fences, the lease and host groups, changelogs)."""
    exactly_once: bool


def acl_rules(job: JobFootprint) -> list[AclRule]:
    """The ACLs ``job`` needs on its system, in the order an operator reads them.

    DESCRIBE is never listed: Kafka implies it from READ and WRITE (as it implies
    DESCRIBE_CONFIGS from nothing the job needs: without it, the coordinator does not
    check that its compacted topics are compacted, and says so once).
    """
    ns = job.namespace
    rules = [AclRule("TOPIC", "LITERAL", ns + s, ("READ", "WRITE"),
                     "input the job writes too (a pipeline's intermediate stream)")
             if s in job.outputs else AclRule("TOPIC", "LITERAL", ns + s, ("READ",), "input")
             for s in sorted(job.inputs)]
    rules += [AclRule("TOPIC", "LITERAL", ns + s, ("WRITE",), "output")
              for s in sorted(job.outputs) if s not in job.inputs]
    internal = f"__sampan-{job.job}-"
    if job.metadata:
        rules.append(AclRule("TOPIC", "PREFIXED", ns + internal, ("READ", "WRITE"),
                             "the job's coordinator stream, checkpoints and fences"))
        rules += [AclRule("TOPIC", "LITERAL", ns + c, ("READ", "WRITE"),
                          "changelog of a store (READ: restores and standbys)")
                  for c in sorted(job.changelogs)]
        rules.append(AclRule("GROUP", "PREFIXED", ns + internal, ("READ",),
                             "one coordinator per job (a group lease); hosts' membership "
                             "with --host"))
    if job.exactly_once and (job.metadata or job.outputs):
        rules.append(AclRule("TRANSACTIONAL_ID", "PREFIXED", f"{ns}sampan-{job.job}-",
                             ("WRITE",), "exactly-once: one transactional producer per worker"))
    if job.metadata:
        rules.append(AclRule("TOPIC", "PREFIXED", ns + internal, ("CREATE",),
                             "the job creates its internal topics",
                             when="the job's first start"))
        rules += [AclRule("TOPIC", "LITERAL", ns + c, ("CREATE",),
                          "the job creates its changelogs, one partition per task",
                          when="the job's first start") for c in sorted(job.changelogs)]
        rules += [AclRule("TOPIC", "LITERAL", ns + c, ("ALTER",),
                          "the job grows a changelog to one partition per task",
                          when="a changelog with fewer partitions than the job has tasks")
                  for c in sorted(job.changelogs)]
    created = sorted({*job.created_if_missing} & {*job.inputs, *job.outputs})
    rules += [AclRule("TOPIC", "LITERAL", ns + s, ("CREATE",),
                      "a declared stream with partitions = N: the job creates it",
                      when="the topic does not exist yet") for s in created]
    return rules


def kafka_acls_command(rule: AclRule, principal: str, bootstrap: str) -> str:
    """The ``kafka-acls.sh`` command line that grants ``rule`` to ``principal``."""
    flag = {"TOPIC": "--topic", "GROUP": "--group", "TRANSACTIONAL_ID": "--transactional-id",
            "CLUSTER": "--cluster"}[rule.resource]
    resource = flag if rule.resource == "CLUSTER" else f"{flag} '{rule.name}'"
    pattern = " --resource-pattern-type prefixed" if rule.pattern == "PREFIXED" else ""
    operations = " ".join(f"--operation {_camel(op)}" for op in rule.operations)
    return (f"kafka-acls.sh --bootstrap-server {bootstrap} --command-config admin.properties "
            f"--add --allow-principal '{principal}' {operations} {resource}{pattern}")


def _camel(operation: str) -> str:
    """``DESCRIBE_CONFIGS`` → ``DescribeConfigs`` (kafka-acls' spelling)."""
    return "".join(part.capitalize() for part in operation.split("_"))
