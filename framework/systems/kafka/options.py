"""``client_options`` of a kafka system: timeouts, batch sizes, namespace, security."""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from difflib import get_close_matches
from pathlib import Path
from typing import Any

from framework.errors import ConfigError
from framework.systems.kafka.security import SECURITY_OPTIONS, KafkaSecurity

__all__ = ["KafkaOptions", "read_client_options", "toml_inline"]

_NAMESPACE = re.compile(r"[A-Za-z0-9._-]{0,200}")


def _suggestion(key: str, known: set[str]) -> str:
    match = get_close_matches(key, sorted(known), n=1)
    return f" (did you mean {match[0]!r}?)" if match else ""


@dataclass(frozen=True)
class KafkaOptions:
    """``client_options`` of a kafka system (all optional)."""

    timeout_s: float = 10.0
    """Bound on every broker call (admin, metadata, offsets, produce acknowledgement)."""

    replication_factor: int = 1
    """Replicas of each topic sampan creates (use 3 on a production cluster)."""

    enable_idempotence: bool | None = None
    """None: use the idempotent producer when the broker supports it (tansu's memory
    storage does not) and fall back to plain ``acks=all`` with a warning; True: require
    it; False: never."""

    metadata_max_age_s: float = 5.0
    """How stale the partition counts used to place produced records may be."""

    producer_batch_kb: int = 512
    """Largest record batch the producer builds per partition (aiokafka's 16 KB default
    costs a request per ~500 small records; keep it below the broker's message.max.bytes)."""

    fetch_partition_kb: int = 4096
    """Most a fetch reads of one partition (aiokafka's ``max_partition_fetch_bytes``).
    aiokafka asks a broker again only once every partition it fetched from there was
    read, so with 1 MiB (the Kafka default) a fast worker waited on the broker for a
    quarter of its time; 4 MiB halved that (a response stays under aiokafka's 50 MiB
    ``fetch_max_bytes`` whatever the partition count)."""

    transaction_timeout_s: float = 60.0
    """Exactly-once: how long the broker keeps a worker's transaction open without hearing
    from it; past it the broker aborts it. Bounds how long a worker that died mid-commit
    (and is not restarted) holds readers of the partitions it wrote; keep it well above
    a commit's duration."""
    namespace: str = ""
    """Prepended to every name sampan gives the cluster: each stream's topic (stream
    ``words`` is topic ``<namespace>words``), the job's consumer groups and its
    transactional ids. Topics outside the namespace are invisible to the system, so jobs
    (and drills) using the same stream and job names share a cluster under distinct
    namespaces. Default none: streams are the topics of the same name."""

    topic_configs: Mapping[str, str] = field(default_factory=dict)
    """Topic configs (``retention.ms``, ``min.insync.replicas`` …) given to every topic
    sampan creates — inputs, outputs, intermediate streams, changelogs (whose
    ``cleanup.policy`` stays ``compact``); the broker's defaults for the rest."""

    client_id: str = "sampan"
    security: KafkaSecurity = field(default_factory=KafkaSecurity)
    """TLS and SASL (`framework.systems.kafka.security`): the ``security_protocol``,
    ``sasl_*`` and ``ssl_*`` keys of ``client_options``."""

    @classmethod
    def from_mapping(cls, system: str, options: Mapping[str, Any],
                     root: Path | None = None) -> KafkaOptions:
        """Validate ``[systems.<system>.client_options]``; unknown keys are errors. Paths
        and the OAUTHBEARER token provider resolve from ``root`` (the job file's folder)."""
        own = {f.name for f in fields(cls)} - {"security"}
        known = own | set(SECURITY_OPTIONS)
        unknown = sorted(set(options) - known)
        if unknown:
            raise ConfigError(
                f"[systems.{system}.client_options]: unknown option(s) {unknown} for a kafka "
                f"system{_suggestion(unknown[0], known)}; known: {', '.join(sorted(known))}"
            )
        for key in ("producer_batch_kb", "fetch_partition_kb"):
            default = getattr(cls, key)
            kb = options.get(key, default)
            if type(kb) is not int or not 1 <= kb <= 1 << 20:
                raise ConfigError(
                    f"[systems.{system}.client_options] {key} must be a whole number of KiB "
                    f"from 1 to 1048576 (default {default}), got {kb!r}")
        timeout = options.get("transaction_timeout_s", cls.transaction_timeout_s)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not (
                1 <= timeout <= 900):
            raise ConfigError(
                f"[systems.{system}.client_options] transaction_timeout_s must be a number of "
                f"seconds from 1 to 900 (the broker's transaction.max.timeout.ms is 15 min by "
                f"default; default {cls.transaction_timeout_s:g}), got {timeout!r}")
        namespace = options.get("namespace", "")
        if not isinstance(namespace, str) or not _NAMESPACE.fullmatch(namespace):
            raise ConfigError(
                f"[systems.{system}.client_options] namespace must be a string of letters, "
                f"digits, '.', '_' and '-' (a Kafka topic name prefix), got {namespace!r}")
        configs = options.get("topic_configs", {})
        if not isinstance(configs, Mapping) or not all(
                isinstance(k, str) and isinstance(v, str | int) and not isinstance(v, bool)
                for k, v in configs.items()):
            raise ConfigError(
                f"[systems.{system}.client_options] topic_configs must be a table of Kafka "
                f'topic configs, e.g. {{ "retention.ms" = "-1" }}, got {configs!r}')
        if "cleanup.policy" in configs:
            raise ConfigError(
                f"[systems.{system}.client_options] topic_configs: cleanup.policy is sampan's "
                f"(changelogs are compacted, streams are not); drop it")
        options = {**options, "topic_configs": {k: str(v) for k, v in configs.items()}}
        security = KafkaSecurity.from_options(system, options, root)
        return cls(**{key: value for key, value in options.items() if key in own},
                   security=security)

    def named(self, name: str) -> str:
        """``name`` (a topic, group or transactional id) inside the namespace."""
        return self.namespace + name

    def client_kwargs(self, bootstrap: str) -> dict[str, Any]:
        """Connection arguments shared by every aiokafka client sampan makes (admin,
        producers, consumers, group members, Spark's fetcher): one place, so all of them
        connect alike."""
        return {
            "bootstrap_servers": bootstrap,
            "client_id": self.client_id,
            "request_timeout_ms": int(self.timeout_s * 1000),
            **self.security.client_kwargs(),
        }


def read_client_options(path: Path) -> dict[str, Any]:
    """The ``client_options`` a TOML file holds (``sampan drill --client-options``,
    benches): its file names made absolute from the file's folder, checked at once
    (`ConfigError` naming the file)."""
    try:
        with path.open("rb") as handle:
            options = tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise ConfigError(f"--client-options {path}: cannot read it ({error}); give a TOML "
                          'file of kafka client_options, e.g. security_protocol = "SASL_SSL"'
                          ) from None
    for key, value in options.items():
        if key.endswith("file") and isinstance(value, str) and "${" not in value:
            options[key] = str((path.parent / Path(value).expanduser()).resolve())
    try:
        KafkaOptions.from_mapping("kafka", options, path.parent)
    except ConfigError as error:
        raise ConfigError(f"--client-options {path}: {error}") from None
    return options


def toml_inline(options: Mapping[str, Any]) -> str:
    """``options`` as a TOML inline table (strings, numbers and booleans)."""
    def value(item: Any) -> str:
        return ("true" if item else "false") if isinstance(item, bool) else json.dumps(item)
    return "{ " + ", ".join(f"{key} = {value(v)}" for key, v in options.items()) + " }"
