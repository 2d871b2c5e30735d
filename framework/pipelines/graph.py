"""The operator graph a pipeline is built into: one `Node` per operator, each knowing its
parents, where in the user's code it was made, and what it does to keys.

The builder (`framework.pipelines.builder`) appends nodes; the compiler
(`framework.pipelines.plan`) cuts the graph into stages at its intermediate streams and
checks it; the code generator (`framework.pipelines.codegen`) turns each stage into
Python functions. Nodes are numbered in creation order, so a pipeline built by the same
code compiles to the same plan, names and all.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from framework.errors import ConfigError

__all__ = ["EVENT_TIME", "KEY_CHANGING", "ROOTS", "STATEFUL", "Node", "PipelineError",
           "caller"]


class PipelineError(ConfigError):
    """A pipeline that cannot run as built or declared; the message names the operator
    (and where the code made it) and the fix."""


ROOTS = frozenset({"source", "table", "intermediate"})
"""Kinds of node that read a stream: where a stage's records enter."""
KEY_CHANGING = frozenset({"map", "flat_map"})
"""Kinds of node whose output keys may differ from their input's (``process`` too, unless
it says it keeps them)."""
STATEFUL = frozenset({"aggregate", "count", "reduce", "window", "join", "join_table"})
"""Kinds of node that keep state per key, so need records on their key's task."""
EVENT_TIME = frozenset({"window", "join"})
"""Kinds of node built on `framework.windows` (they read the record's envelope)."""


@dataclass(eq=False)
class Node:
    """One operator. ``args`` holds what it was given (functions, names, options)."""

    id: int
    kind: str
    parents: tuple[Node, ...]
    args: dict[str, Any]
    where: str
    """``file:line`` of the user code that made it."""
    children: list[Node] = field(default_factory=list)

    @property
    def label(self) -> str:
        """``kind-id``, the node's name in `sampan describe` and in messages."""
        return f"{self.kind.replace('_', '-')}-{self.id}"

    @property
    def shown(self) -> str:
        """How messages name it: the call and where it was made."""
        detail = self.args.get("stream") or self.args.get("store") or self.args.get("name")
        inner = repr(detail) if detail else ""
        return f"{self.kind}({inner}) at {self.where}"

    @property
    def keeps_keys(self) -> bool:
        """Whether every record leaves with the key it came with."""
        if self.kind in KEY_CHANGING:
            return False
        if self.kind == "process":
            return bool(self.args.get("same_keys"))
        return True


_HERE = str(Path(__file__).resolve().parent)


def caller() -> str:
    """``file:line`` of the first frame outside this package: the user's operator call."""
    frame = inspect.currentframe()
    while frame is not None and frame.f_code.co_filename.startswith(_HERE):
        frame = frame.f_back
    if frame is None:
        return "?"
    return f"{Path(frame.f_code.co_filename).name}:{frame.f_lineno}"
