"""`sampan describe JOB`: what a job is made of, from its job file alone (no broker).

For a pipeline job, its compiled plan: each stage with the streams it reads and writes
and its operators (``kind-id``, what they use, where the code built them, ``-->`` what
follows, ``<--`` what feeds them), as Kafka Streams' ``Topology.describe()`` does; then
every stream with its role and partition count as the job file gives it, and every store
with its changelog. ``--code`` adds the Python the stages were compiled into. For a task
job: the task, its inputs, the other declared streams and the stores.
"""

from __future__ import annotations

import argparse
from typing import Any

from framework.commands.jobarg import add_job_argument
from framework.config import JobConfig, StreamConfig
from framework.pipelines.graph import ROOTS, Node
from framework.pipelines.plan import Plan
from framework.pipelines.task import compiled_for
from framework.windows import Session, WindowKind
from framework.wording import counted

__all__ = ["add_describe_command", "describe_job"]


def add_describe_command(commands: Any) -> None:
    """Register `sampan describe` on the CLI's subparsers."""
    parser = commands.add_parser(
        "describe", help="print what a job is made of: a pipeline's stages, streams, stores",
        description="Print a job's plan from its job file (no broker needed): for a pipeline "
        "job its stages and operators, the streams it reads, writes and re-keys through "
        "(with the partition counts the file declares) and its stores with their "
        "changelogs; for a task job its task, streams and stores.")
    add_job_argument(parser)
    parser.add_argument("--code", action="store_true",
                        help="also print the Python a pipeline's stages are compiled into")
    parser.set_defaults(handler=_command)


def _command(args: argparse.Namespace) -> int:
    from framework.config import load_config

    print(describe_job(load_config(args.job), code=args.code), end="")
    return 0


def describe_job(config: JobConfig, *, code: bool = False) -> str:
    """The text `sampan describe` prints for ``config``."""
    if config.pipeline is None:
        return _task_job(config)
    compiled = compiled_for(config)
    text = _pipeline_job(config, compiled.plan)
    if code:
        text += f"\nCompiled stages:\n{compiled.code.source}"
    return text


def _task_job(config: JobConfig) -> str:
    reads = [*config.inputs, *config.broadcast_inputs]
    lines = [f'Job "{config.name}": task {config.task}', "", "Reads:"]
    lines += [f"  {_stream(config, name)}"
              + (" (broadcast)" if name in config.broadcast_inputs else "") for name in reads]
    others = [name for name in sorted(config.streams) if name not in reads]
    lines += ["", "Other declared streams (the task may write any of them):"]
    lines += [f"  {_stream(config, name)}" for name in others] or ["  none"]
    lines += ["", *_stores(config, {})]
    return "\n".join(lines) + "\n"


def _pipeline_job(config: JobConfig, plan: Plan) -> str:
    lines = [f'Job "{config.name}": pipeline {config.pipeline}, run by {config.task}']
    for stage in plan.stages:
        lines += ["", f"Stage {stage.index}", f"  reads:  {', '.join(stage.reads)}"]
        if stage.writes:
            lines.append(f"  writes: {', '.join(stage.writes)}")
        for node in stage.nodes:
            if node.kind == "branch_port":
                continue
            lines.append(f"  {node.label}{_detail(node, plan, config)} [{node.where}]")
            lines += [f"    --> {name}" for name in _followers(node, plan)]
            lines += [f"    <-- {name}" for name in _feeders(node)]
    roles = {**{s: "source" for s in plan.sources}, **{s: "table" for s in plan.broadcast},
             **{s: "intermediate" for s in plan.intermediate}}
    for node in plan.nodes:
        if node.kind == "table":
            roles[plan.streams[node.id]] = "table"
        elif node.kind == "to":
            roles.setdefault(plan.streams[node.id], "output")
    width = max(len(name) for name in roles)
    lines += ["", "Streams (partitions as the job file declares them; sampan run creates "
                  "those missing):"]
    for name, role in roles.items():
        spec = config.streams[name]
        extra = (f", retention_ms {spec.retention_ms}" if spec.retention_ms is not None
                 else "")
        lines.append(f"  {name:<{width}}  {role:<12}  {_count(spec)}{extra}")
    owners = {name: use.node.label for name, use in plan.stores.items()}
    lines += ["", *_stores(config, owners)]
    return "\n".join(lines) + "\n"


def _stores(config: JobConfig, owners: dict[str, str]) -> list[str]:
    """The Stores section: each store, its kind, who uses it and its changelog."""
    if not config.stores:
        return ["Stores: none"]
    lines = ["Stores (one per task; a changelog has one partition per task):"]
    width = max(len(name) for name in config.stores)
    used = max((len(owner) for owner in owners.values()), default=0)
    for name in sorted(config.stores):
        store = config.stores[name]
        log = (f"changelog {config.changelog_stream(name)}" if store.changelog
               else "no changelog")
        owner = f"{owners.get(name, ''):<{used}}  " if used else ""
        lines.append(f"  {name:<{width}}  {store.type:<7}  {owner}{log}")
    return lines


def _stream(config: JobConfig, name: str) -> str:
    return f"{name} ({_count(config.streams[name])})"


def _count(spec: StreamConfig) -> str:
    return counted(spec.partitions, "partition") if spec.partitions else "partitions not set"


def _detail(node: Node, plan: Plan, config: JobConfig) -> str:
    args = node.args
    if node.kind in ROOTS:
        stream = plan.streams[node.id]
        parts = [stream, _count(config.streams[stream])]
        if node.kind == "table":
            parts.append(f"store {args['store']}" + (", broadcast" if args["broadcast"]
                                                      else ""))
        return f" ({'; '.join(parts)})"
    if node.kind in ("to", "partition_by"):
        return f" (to {plan.streams[node.id]})"
    if node.kind in ("aggregate", "count", "reduce"):
        return f" (store {args['store']})"
    if node.kind == "window":
        options = "".join(f", {name} {args[key]}" for name, key, default in (
            ("emit", "emit", "close"), ("event time from", "event_time", "records"))
                          if args[key] != default)
        return f" ({_window_kind(args['kind'])}, store {args['store']}{options})"
    if node.kind == "join":
        return (f" ({args['how']}, {args['before_ms']} ms before to {args['after_ms']} ms "
                f"after, grace {args['grace_ms']} ms, store {args['store']})")
    if node.kind == "join_table":
        table = args["table"]
        return f" ({args['how']}, table {plan.streams[table.id]} in store {table.args['store']})"
    if node.kind == "process":
        name = getattr(args["factory"], "__qualname__", repr(args["factory"]))
        stores = f"; stores {', '.join(args['stores'])}" if args["stores"] else ""
        return f" ({name}{stores})"
    if node.kind == "branch":
        return f" ({counted(len(args['predicates']), 'predicate')}, then the rest)"
    return ""


def _window_kind(kind: WindowKind) -> str:
    """``kind`` in a few words: ``tumbling 60000 ms``, ``hopping 300000 ms every 60000
    ms``, ``sessions gap 30000 ms``, with the grace when there is one."""
    if isinstance(kind, Session):
        shown = f"sessions gap {kind.gap_ms} ms"
    elif kind.advance_ms == kind.size_ms:
        shown = f"tumbling {kind.size_ms} ms"
    else:
        shown = f"hopping {kind.size_ms} ms every {kind.advance_ms} ms"
    return shown + (f", grace {kind.grace_ms} ms" if kind.grace_ms else "")


def _followers(node: Node, plan: Plan) -> list[str]:
    """What ``node`` passes records to (a branch: each branch's operators; a table: the
    joins that read it)."""
    if node.kind == "table":
        return [n.label for n in plan.nodes if n.kind == "join_table" and n.args["table"] is node]
    if node.kind == "branch":
        return [f"{child.label} (branch {port.args['index']})"
                for port in node.children for child in port.children]
    found = [child.label for child in node.children]
    if node.kind == "partition_by":
        found.append(node.args["root"].label)
    return found


def _feeders(node: Node) -> list[str]:
    """What feeds ``node`` records (or, for a table join, the table)."""
    found = [f"{p.parents[0].label} (branch {p.args['index']})" if p.kind == "branch_port"
             else p.label for p in node.parents]
    if node.kind == "join_table":
        found.append(node.args["table"].label)
    if node.kind == "intermediate":
        found.append(node.args["sink"].label)
    return found
