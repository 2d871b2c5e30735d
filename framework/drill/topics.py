"""A drill's topics on Kafka: each drill puts every topic, group and transactional id in a
namespace of its own (``drill-<example>-<random>.``), and deletes its topics — internal
ones and changelogs included — once it is done, unless ``--keep``."""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass
from pathlib import Path

from framework.systems.base import System
from framework.systems.kafka.system import KafkaSystem
from framework.wording import counted

__all__ = ["DrillTopics", "delete_after_failure", "drill_namespace", "leave_topics"]

log = logging.getLogger(__name__)


def drill_namespace(kind: str) -> str:
    """A new namespace for one drill of ``kind`` (an example's name, ``hosts``)."""
    return f"drill-{kind}-{secrets.token_hex(4)}."


@dataclass(frozen=True)
class DrillTopics:
    """What a drill left on its broker: its namespace's topics, deleted or kept."""

    namespace: str
    bootstrap: str
    job_file: Path
    topics: int
    kept: bool

    def line(self) -> str:
        """The report's line: the namespace, and what became of its topics."""
        where = f"  kafka namespace {self.namespace} on {self.bootstrap}: "
        if not self.kept:
            return where + f"its {counted(self.topics, 'topic')} deleted (--keep keeps them)"
        pattern = self.namespace.replace(".", "\\.") + ".*"  # a regex of Java's
        return where + (
            f"its {counted(self.topics, 'topic')} kept (--keep); `sampan streams list "
            f"{self.job_file} --all` lists them, `sampan streams delete kafka.NAME --job "
            f"{self.job_file} --yes` deletes one (or `kafka-topics.sh --bootstrap-server "
            f"{self.bootstrap} --delete --topic '{pattern}'` all)")


async def namespace_topics(system: KafkaSystem) -> list[str]:
    """Every topic of ``system``'s namespace (as streams), sampan's own included."""
    return sorted({*await system.list_streams(), *await system.hidden_streams()})


async def leave_topics(system: System, job_file: Path, keep: bool) -> DrillTopics | None:
    """Delete the drill's topics (every one of its namespace) unless ``keep``; None on a
    system without a namespace (the local log: the output folder holds everything)."""
    if not isinstance(system, KafkaSystem) or not system.options.namespace:
        return None
    topics = await namespace_topics(system)
    if not keep:
        await system.delete_streams(topics)
    return DrillTopics(system.options.namespace, system.bootstrap, job_file, len(topics),
                       keep)


async def delete_after_failure(system: System) -> None:
    """After a drill that failed: delete its topics, saying so, and never raise (the
    drill's own error is what the user needs to see)."""
    try:
        found = await leave_topics(system, Path(), keep=False)
    except Exception as error:
        log.warning("the failed drill's topics could not be deleted: %s", error)
        return
    if found is not None:
        log.warning("deleted the failed drill's %s in namespace %s (--keep keeps them)",
                    counted(found.topics, "topic"), found.namespace)
