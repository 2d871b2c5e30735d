"""Compiling a pipeline: its operator graph, checked against the job file, cut into stages.

A *stage* is what one task does with the records of the streams it reads before they
leave it again: the operators connected to each other without an intermediate stream in
between. `partition_by` ends a stage (its records go to the intermediate stream) and the
records read back from that stream start another. Every stage runs in the same task
class (`framework.pipelines.task.PipelineTask`), which hands each record to the stage of
the stream it came from; every stream the pipeline reads — sources, tables, intermediate
streams — is an ordinary input of the job, grouped into tasks by partition, so each
key's records and state stay on one task across expansions of any of them.

The checks here make a wrong pipeline fail when the job file loads, naming the operator
and where the code built it: a stateful operator after a key change with no
`partition_by`, a join of streams that are not co-partitioned, an undeclared stream, a
store used twice.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from framework.config.kinds import JOB_NAME
from framework.config.pipeline import DeclaredStream, JobFacts, JobTables
from framework.pipelines.graph import EVENT_TIME, ROOTS, STATEFUL, Node, PipelineError
from framework.windows import Reducer, Session, WindowKind

__all__ = ["INTERMEDIATE_METADATA_MAX_AGE_S", "INTERMEDIATE_RETENTION_MS", "Plan", "Stage",
           "StoreUse", "compile_plan", "upstream_roots"]

INTERMEDIATE_RETENTION_MS = 3_600_000
"""``retention_ms`` of an intermediate stream on the local log unless the job file sets
one: batches an hour old that every reader has committed past are deleted."""
INTERMEDIATE_METADATA_MAX_AGE_S = 0
"""``metadata_max_age_s`` of a Kafka system holding intermediate streams unless the job
file sets it: a worker places the records it writes to them by the partition count the
broker gives at each commit, not by one up to 5 s old, so when one is expanded the
records the job writes under the old count land before the barrier the coordinator sets
(see docs/pipelines.md)."""


@dataclass(frozen=True)
class StoreUse:
    """A store the pipeline declares: which operator keeps what in it."""

    name: str
    node: Node
    purpose: str
    """``aggregate``, ``windows``, ``join``, ``table`` or ``step``."""
    defaults: Mapping[str, Any]
    """Keys of its ``[stores.<name>]`` table unless the job file sets them."""


@dataclass
class Stage:
    """The operators one task applies between reading records and writing them out."""

    index: int
    nodes: list[Node]
    """In the order the code built them."""
    reads: list[str] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)
    stores: list[str] = field(default_factory=list)


@dataclass
class Plan:
    """A checked pipeline: its stages, the streams it reads and writes, its stores."""

    nodes: list[Node]
    """The pipeline's operators, in the order the code built them."""
    job: str
    metadata_system: str
    streams: dict[int, str]
    """Node id → the stream it reads (roots) or writes (`to`, `partition_by`)."""
    partitions: dict[str, int | None]
    """Stream → its partition count in the job file (intermediate: the one it gets)."""
    intermediate: list[str]
    sources: list[str]
    broadcast: list[str]
    stores: dict[str, StoreUse]
    stages: list[Stage]
    intermediate_defaults: dict[str, dict[str, Any]]
    client_options: dict[str, dict[str, Any]]
    late_streams: dict[int, str] = field(default_factory=dict)
    """Window node id → the stream its late records go to (``late_stream``, qualified)."""

    def tables(self) -> JobTables:
        """What the job file gets from this plan (`framework.config.pipeline`)."""
        return JobTables(
            sources=tuple(self.sources), inputs=(*self.sources, *self.intermediate),
            broadcast_inputs=tuple(self.broadcast), intermediate=tuple(self.intermediate),
            streams=self.intermediate_defaults,
            stores={name: dict(use.defaults) for name, use in self.stores.items()},
            client_options=self.client_options)

    def stage_of(self, node: Node) -> Stage:
        return next(stage for stage in self.stages if node in stage.nodes)


def compile_plan(nodes: list[Node], facts: JobFacts) -> Plan:
    """The plan of a pipeline's ``nodes`` in a job declaring ``facts``; `PipelineError`
    for the first thing that cannot run (one line: the operator, where it was built, the
    fix)."""
    roots = [n for n in nodes if n.kind in ROOTS]
    declared = [n for n in roots if n.kind != "intermediate"]
    if not declared:
        raise PipelineError("the pipeline reads no stream; start it with "
                            "Pipeline.source(\"system.stream\")")
    meta = facts.metadata_system or _declared(
        declared[0], declared[0].args["stream"], facts).partition(".")[0]
    streams: dict[int, str] = {}
    late_streams: dict[int, str] = {}
    for node in nodes:
        if node.kind in ("source", "table", "to"):
            streams[node.id] = _declared(node, node.args["stream"], facts)
        elif node.kind == "intermediate":
            streams[node.id] = streams[node.args["sink"].id] = _intermediate(node, meta, facts)
        elif node.kind == "window" and node.args.get("late_stream"):
            late_streams[node.id] = _declared(node, node.args["late_stream"], facts)
    read = {streams[n.id]: n for n in roots}
    for node in nodes:
        if node.kind == "to" and streams[node.id] in read:
            raise PipelineError(f"{node.shown} writes to {streams[node.id]}, which the "
                                f"pipeline reads ({read[streams[node.id]].shown}); write "
                                "to another stream")
    partitions = _partitions(nodes, streams, facts)
    _check_keys(nodes)
    _check_event_time(nodes, streams)
    _check_co_partitioning(nodes, streams, partitions)
    stores = _stores(nodes, streams, facts)
    stages = _stages(nodes, streams, stores)
    intermediate = [streams[n.id] for n in roots if n.kind == "intermediate"]
    local = facts.systems.get(meta) == "local"
    defaults: dict[str, dict[str, Any]] = {}
    for node in roots:
        if node.kind != "intermediate":
            continue
        first = upstream_roots(node.args["sink"])[0]
        upstream = facts.streams.get(streams[first.id]) or DeclaredStream(meta)
        table: dict[str, Any] = {"partitions": partitions[streams[node.id]],
                                 "key_serde": upstream.key_serde or "string",
                                 "value_serde": upstream.value_serde or "json"}
        if local:
            table["retention_ms"] = INTERMEDIATE_RETENTION_MS
        defaults[streams[node.id]] = table
    return Plan(
        nodes=nodes, job=facts.name, metadata_system=meta, streams=streams,
        partitions=partitions, intermediate=intermediate,
        sources=[streams[n.id] for n in declared if not n.args.get("broadcast")],
        broadcast=[streams[n.id] for n in declared if n.args.get("broadcast")],
        stores=stores, stages=stages, intermediate_defaults=defaults,
        late_streams=late_streams,
        client_options=({meta: {"metadata_max_age_s": INTERMEDIATE_METADATA_MAX_AGE_S}}
                        if intermediate and facts.systems.get(meta) == "kafka" else {}))


def _declared(node: Node, stream: str, facts: JobFacts) -> str:
    """``stream`` as the job file declares it: ``"system.stream"``, or a name without its
    system when exactly one system declares it (so one pipeline runs on the local log and
    on Kafka, as a task sending to ``f"{envelope.ssp.system}.out"`` does)."""
    if stream in facts.streams:
        return stream
    matches = [q for q in facts.streams if q.partition(".")[2] == stream]
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise PipelineError(f"{node.shown}: stream {stream!r} is declared in several "
                            f"systems ({', '.join(sorted(matches))}); name it with its "
                            f"system, e.g. {sorted(matches)[0]!r}")
    shown = stream if "." in stream else f"<system>.{stream}"
    raise PipelineError(f"{node.shown}: stream {stream} is not declared; add a "
                        f'[streams."{shown}"] table to the job file')


def _intermediate(node: Node, meta: str, facts: JobFacts) -> str:
    name = node.args["name"]
    if not isinstance(name, str) or not JOB_NAME.fullmatch(name):
        raise PipelineError(f"partition_by(name={name!r}) at {node.where}: name the "
                            "intermediate stream with letters, digits, '_', '.' and '-' "
                            "(it is part of the stream's name)")
    return f"{meta}.{facts.name}-{name}-repartition"


def upstream_roots(node: Node) -> list[Node]:
    """The roots whose records reach ``node`` in its stage (a joined table's stream not
    included), in id order."""
    found: dict[int, Node] = {}
    work = [node]
    seen: set[int] = set()
    while work:
        current = work.pop()
        if current.id in seen:
            continue
        seen.add(current.id)
        if current.kind in ROOTS:
            found[current.id] = current
        work.extend(current.parents)
    return [found[i] for i in sorted(found)]


def _partitions(nodes: list[Node], streams: Mapping[int, str],
                facts: JobFacts) -> dict[str, int | None]:
    """Every stream's partition count as the job file gives it; an intermediate stream's
    own declaration, else the most partitions of the streams feeding it."""
    counts: dict[str, int | None] = {}
    for node in nodes:
        if node.id not in streams:
            continue
        stream = streams[node.id]
        declared = facts.streams.get(stream)
        if node.kind == "intermediate" and (declared is None or declared.partitions is None):
            feeding = [counts.get(streams[r.id]) for r in upstream_roots(node.args["sink"])]
            known = [n for n in feeding if n is not None]
            if not known:
                raise PipelineError(
                    f"partition_by(name={node.args['name']!r}) at {node.where}: the streams "
                    f"it re-keys declare no partitions, so {stream} has no partition count; "
                    f'add partitions = N to [streams."{stream}"] in the job file')
            counts[stream] = max(known)
        elif stream not in counts:
            counts[stream] = declared.partitions if declared is not None else None
    return counts


def _check_keys(nodes: list[Node]) -> None:
    """Stateful operators only after records are on their key's task."""
    changed: dict[int, Node | None] = {}  # node id -> the operator that changed keys
    for node in nodes:
        if node.kind in ROOTS:
            changed[node.id] = None
            continue
        inherited = next((changed[p.id] for p in node.parents if changed[p.id] is not None),
                         None)
        table = node.args.get("table")
        needs_keys = node.kind in STATEFUL and not (
            node.kind == "join_table" and table is not None and table.args.get("broadcast"))
        if needs_keys and inherited is not None:
            raise PipelineError(
                f"{node.shown} keeps state per key, but {inherited.shown} may have changed "
                "the keys, so records of one key can be on several tasks; re-key with "
                ".partition_by(..., name=...) before it (or use map_values / process(..., "
                "same_keys=True) when the key stays)")
        changed[node.id] = inherited if node.keeps_keys else node


def _check_event_time(nodes: list[Node], streams: Mapping[int, str]) -> None:
    """Windows and joins read the record's envelope: not of records a window, join or
    custom step made in the same stage; watermark records only come from a source."""
    made: dict[int, Node | None] = {}  # node id -> the operator whose output it carries
    for node in nodes:
        if node.kind in ROOTS:
            made[node.id] = None
            continue
        inherited = next((made[p.id] for p in node.parents if made[p.id] is not None), None)
        if node.kind in EVENT_TIME:
            if inherited is not None:
                raise PipelineError(
                    f"{node.shown} reads records {inherited.shown} made in the same stage; "
                    "event-time operators read records as their stream delivered them: put "
                    f"a .partition_by(..., name=...) between the two")
            _check_event_time_args(node, streams)
        made[node.id] = node if node.kind in (*EVENT_TIME, "process") else inherited


def _check_event_time_args(node: Node, streams: Mapping[int, str]) -> None:
    args = node.args
    if args["event_time"] not in ("records", "markers"):
        raise PipelineError(f"{node.shown}: event_time must be 'records' or 'markers', got "
                            f"{args['event_time']!r}")
    if args["event_time"] == "markers":
        for root in upstream_roots(node):
            if root.kind != "source":
                raise PipelineError(
                    f"{node.shown}: event_time='markers' closes by the watermark records "
                    f"producers write into a source, but it reads {streams[root.id]}, which "
                    "carries none; use event_time='records' there")
    if node.kind == "window":
        kind, reducer = args["kind"], args["reducer"]
        if not isinstance(kind, WindowKind):
            raise PipelineError(f"{node.shown}: kind must be Tumbling(...), Hopping(...) or "
                                f"Session(...) of framework.windows, got {kind!r}")
        if not (isinstance(reducer, Reducer) or (isinstance(reducer, Mapping) and all(
                isinstance(r, Reducer) for r in reducer.values()))):
            raise PipelineError(f"{node.shown}: the reducer must be count(), sum_of(...), "
                                f"aggregate(...) or a dict of them, got {reducer!r}")
        if isinstance(kind, Session) and isinstance(reducer, Reducer) and reducer.merge is None:
            raise PipelineError(f"{node.shown}: session windows merge aggregates, but "
                                f"reducer {reducer.name!r} has no merge; pass "
                                "fold(..., merge=...)")
        if args["emit"] not in ("close", "update"):
            raise PipelineError(f"{node.shown}: emit must be 'close' or 'update', got "
                                f"{args['emit']!r}")
        if args["late"] == "dead-letter" and not args["late_stream"]:
            raise PipelineError(f"{node.shown}: late='dead-letter' needs late_stream= naming "
                                "a stream declared in the job file")
    else:
        for name in ("before_ms", "after_ms", "grace_ms"):
            value = args[name]
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise PipelineError(f"{node.shown}: {name} must be >= 0 milliseconds, got "
                                    f"{value!r}")


def _check_co_partitioning(nodes: list[Node], streams: Mapping[int, str],
                           partitions: Mapping[str, int | None]) -> None:
    """A join's two sides: one stream each, with equal partition counts."""
    for node in nodes:
        if node.kind == "join":
            sides = [upstream_roots(parent) for parent in node.parents]
            for roots in sides:
                if len(roots) != 1:
                    raise PipelineError(
                        f"{node.shown}: each side of a join reads one stream, but one side "
                        f"reads {', '.join(streams[r.id] for r in roots)}; join before "
                        "merging, or re-key the merged stream with partition_by")
            left, right = sides[0][0], sides[1][0]
            if left is right:
                raise PipelineError(f"{node.shown}: both sides read {streams[left.id]}; "
                                    "join two streams")
            _same_count(node, [streams[left.id], streams[right.id]], partitions)
        elif node.kind == "join_table" and not node.args["table"].args.get("broadcast"):
            table = streams[node.args["table"].id]
            for root in upstream_roots(node):
                _same_count(node, [streams[root.id], table], partitions)


def _same_count(node: Node, names: list[str], partitions: Mapping[str, int | None]) -> None:
    counts = {name: partitions.get(name) for name in names}
    if len({n for n in counts.values() if n is not None}) > 1:
        shown = ", ".join(f"{name} has {n}" for name, n in counts.items())
        raise PipelineError(
            f"{node.shown} needs co-partitioned streams (every key in the same partition "
            f"number of both), but {shown} partitions in the job file; give them the same "
            "count (an intermediate stream: partitions = N in its [streams] table)")


def _stores(nodes: list[Node], streams: Mapping[int, str],
            facts: JobFacts) -> dict[str, StoreUse]:
    stores: dict[str, StoreUse] = {}

    def add(node: Node, name: Any, purpose: str, defaults: Mapping[str, Any]) -> None:
        if not isinstance(name, str) or not JOB_NAME.fullmatch(name):
            raise PipelineError(f"{node.shown}: name the store with letters, digits, '_', "
                                f"'.' and '-', got {name!r}")
        if name in stores:
            raise PipelineError(f"{node.shown}: store {name!r} is already used by "
                                f"{stores[name].node.shown}; give each operator its own")
        stores[name] = StoreUse(name, node, purpose, defaults)

    def declared(node: Node) -> DeclaredStream:
        return facts.streams.get(streams[node.id]) or DeclaredStream("")

    for node in nodes:
        kind = node.kind
        if kind in ("aggregate", "count", "reduce"):
            root = upstream_roots(node)[0]
            add(node, node.args["store"], "aggregate",
                {"key_serde": declared(root).key_serde or "string", "value_serde": "json"})
        elif kind == "window":
            add(node, node.args["store"], "windows", {})
        elif kind == "join":
            add(node, node.args["store"], "join", {})
        elif kind == "table":
            stream = declared(node)
            add(node, node.args["store"], "table",
                {"key_serde": stream.key_serde or "string",
                 "value_serde": stream.value_serde or "json"})
        elif kind == "process":
            for name in node.args["stores"]:
                add(node, name, "step", {})
    return stores


def _stages(nodes: list[Node], streams: Mapping[int, str],
            stores: Mapping[str, StoreUse]) -> list[Stage]:
    """The connected parts of the graph, intermediate streams cut, in build order."""
    group = {node.id: node.id for node in nodes}

    def find(i: int) -> int:
        while group[i] != i:
            group[i] = group[group[i]]
            i = group[i]
        return i

    def join(a: int, b: int) -> None:
        a, b = find(a), find(b)
        group[max(a, b)] = min(a, b)

    for node in nodes:
        for parent in _links(node):
            join(node.id, parent.id)
    members: dict[int, list[Node]] = {}
    for node in nodes:
        members.setdefault(find(node.id), []).append(node)
    stages = []
    for index, part in enumerate(sorted(members.values(), key=lambda ns: ns[0].id)):
        stage = Stage(index, part)
        stage.reads = _unique(streams[n.id] for n in part if n.kind in ROOTS)
        stage.writes = _unique(streams[n.id] for n in part
                               if n.kind in ("to", "partition_by"))
        stage.stores = [use.name for use in stores.values() if use.node in part]
        stages.append(stage)
    return stages


def _links(node: Node) -> list[Node]:
    if node.kind == "join_table":
        return [*node.parents, node.args["table"]]
    return list(node.parents)


def _unique(names: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(names))
