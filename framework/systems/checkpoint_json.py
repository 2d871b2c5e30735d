"""Checkpoints as JSON text, the one encoding both systems store.

An SSP is written as ``[system, stream, partition]`` and entries are sorted, so equal
checkpoints encode to equal bytes (a compacted checkpoint topic stays diffable).

>>> from groupers import SystemStreamPartition as SSP
>>> cp = Checkpoint("Partition 0", 3, {SSP("local", "clicks", 0): 42}, {"counts": 7})
>>> checkpoint_to_json(cp)
'{"task":"Partition 0","epoch":3,"inputs":[[["local","clicks",0],42]],"changelogs":{"counts":7}}'
>>> checkpoint_from_json(checkpoint_to_json(cp)) == cp
True
"""

from __future__ import annotations

import json

from framework.systems.base import Checkpoint
from groupers import SystemStreamPartition

__all__ = ["checkpoint_from_json", "checkpoint_to_json"]


def checkpoint_to_json(checkpoint: Checkpoint) -> str:
    """Encode ``checkpoint`` deterministically (sorted SSPs and store names)."""
    inputs = sorted([[list(ssp), offset] for ssp, offset in checkpoint.inputs.items()])
    return json.dumps(
        {
            "task": checkpoint.task,
            "epoch": checkpoint.epoch,
            "inputs": inputs,
            "changelogs": dict(sorted(checkpoint.changelogs.items())),
        },
        separators=(",", ":"),
    )


def checkpoint_from_json(text: str | bytes) -> Checkpoint:
    """Decode what `checkpoint_to_json` wrote."""
    data = json.loads(text)
    return Checkpoint(
        task=data["task"],
        epoch=int(data["epoch"]),
        inputs={
            SystemStreamPartition(str(s), str(t), int(p)): int(offset)
            for (s, t, p), offset in data["inputs"]
        },
        changelogs={str(k): int(v) for k, v in data["changelogs"].items()},
    )
