"""`sampan expansion-plan`: print a stream's task table through a series of expansions.

It runs the real grouper on a sample of keys placed by the Kafka default partitioner, so
users can see before an expansion which task every partition and key will land on.
"""

from __future__ import annotations

import groupers as G
from framework.config import StreamRef
from framework.errors import ConfigError
from framework.partitioner import partition_for_key
from framework.wording import counted

SAMPLE_KEYS = tuple(f"user-{n}" for n in range(1000))


def print_expansion_plan(stream: str, counts: list[int], *, naive: bool = False) -> int:
    """Print the grouping at each count; exit status 1 if any sample key changed task."""
    system, name = StreamRef.parse(stream)
    if not name:
        raise ConfigError(f"--stream {stream!r}: expected SYSTEM.STREAM, e.g. local.events")
    if not counts or min(counts) < 1:
        raise ConfigError("--partitions: expected partition counts ≥ 1, e.g. --partitions 2 4 8")
    grouper: G.SspGrouper = G.GroupByPartition() if naive else G.GroupByPartitionFixedTasks()
    home: dict[str, str] = {}
    previous: dict[G.SystemStreamPartition, str] | None = None
    moved_total = 0
    for count in counts:
        ssps = [G.SystemStreamPartition(system, name, p) for p in range(count)]
        try:
            grouping = grouper.group(ssps, previous)
        except G.ExpansionError as error:
            print(f"{counted(count, 'partition')}: refused — {error}")
            return 1
        previous = G.ssp_task_mapping(grouping)
        print(f"{stream} with {counted(count, 'partition')} → {counted(len(grouping), 'task')}")
        for task, members in grouping.items():
            partitions = ", ".join(str(ssp.partition) for ssp in sorted(members))
            print(f"  {task:<12} ← partitions {partitions}")
        moved = 0
        for key in SAMPLE_KEYS:
            partition = partition_for_key(key.encode(), count)
            task = previous[G.SystemStreamPartition(system, name, partition)]
            if home.setdefault(key, task) != task:
                moved += 1
                home[key] = task
        moved_total += moved
        print(f"  sample keys that changed task: {moved} of {len(SAMPLE_KEYS)}\n")
    verdict = "every key kept its task" if moved_total == 0 else (
        f"{moved_total} key moves: a stateful job would miscount these keys")
    print(verdict)
    return 0 if moved_total == 0 else 1
