"""The pipeline API users write against: `Pipeline`, `Stream`, `Table`, `Step`.

A `Stream[K, V]` is records with keys of type ``K`` and values of type ``V``; each
operator returns a new stream whose types follow from the function it was given, so mypy
checks a whole pipeline::

    p = Pipeline()
    views: Stream[str, dict[str, Any]] = p.source("local.page-views")
    views.partition_by(lambda user, view: view["page"], name="by-page") \\
         .count(store="views-per-page") \\
         .to("local.views-per-page")

Building records nothing but the operator graph (`framework.pipelines.graph`); the
job file's ``pipeline = "module:build"`` makes sampan compile it into a task job
(`framework.pipelines.plan`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, overload

from framework.api import Envelope, TaskContext
from framework.config.pipeline import JobFacts, JobTables
from framework.pipelines.graph import Node, PipelineError, caller
from framework.windows import Reducer, WindowKind, WindowResult
from framework.windows.aggregation import LatePolicy

if TYPE_CHECKING:
    from framework.pipelines.plan import Plan

__all__ = ["Emit", "Pipeline", "Step", "Stream", "Table"]

K = TypeVar("K")
V = TypeVar("V")
K2 = TypeVar("K2")
V2 = TypeVar("V2")
A = TypeVar("A")
R = TypeVar("R")

EventTimeSource = Literal["records", "markers"]


class Pipeline:
    """A graph of operators over streams, compiled into one job.

    `source` and `table` name the streams it reads (declared in the job file); the
    operators of `Stream` build the rest. Node ids, intermediate stream and store names
    depend only on the building code, so building again compiles to the same job.
    """

    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self._sources: dict[str, Node] = {}

    def add(self, op: str, parents: tuple[Node, ...], where: str, /, **args: Any) -> Node:
        """Append an operator node (what the `Stream` methods do)."""
        node = Node(len(self.nodes), op, parents, args, where)
        for parent in parents:
            parent.children.append(node)
        self.nodes.append(node)
        return node

    @overload
    def source(self, stream: str) -> Stream[Any, Any]: ...

    @overload
    def source(self, stream: str, key: type[K], value: type[V]) -> Stream[K, V]: ...

    def source(self, stream: str, key: Any = None, value: Any = None) -> Stream[Any, Any]:
        """The records of ``stream`` (``"system.stream"``, declared in the job file), an
        input of the job. ``key`` and ``value`` only type the stream for mypy (or annotate
        the variable: ``events: Stream[str, Event] = p.source(...)``)."""
        found = self._sources.get(stream)
        if found is None:
            found = self._sources[stream] = self.add("source", (), caller(), stream=stream)
        elif found.kind != "source":
            raise PipelineError(f"{stream} is read as a table at {found.where}; read it once")
        return Stream(self, found)

    @overload
    def table(self, stream: str, *, store: str, broadcast: bool = False) -> Table[Any, Any]: ...

    @overload
    def table(self, stream: str, key: type[K], value: type[V], *, store: str,
              broadcast: bool = False) -> Table[K, V]: ...

    def table(self, stream: str, key: Any = None, value: Any = None, *, store: str,
              broadcast: bool = False) -> Table[Any, Any]:
        """``stream`` (usually compacted) materialised in the store ``store``: each record
        sets its key's value, a record without a value deletes it. Streams join it with
        `Stream.join_table`. Co-partitioned with them by default (same partition count,
        same keys); ``broadcast=True`` makes every task read all of it (a
        ``broadcast_inputs`` stream), for a small table joined on any key."""
        if stream in self._sources:
            raise PipelineError(f"{stream} is already read at {self._sources[stream].where}; "
                                "read a stream once")
        node = self.add("table", (), caller(), stream=stream, store=store,
                         broadcast=broadcast)
        self._sources[stream] = node
        return Table(self, node)

    def job_tables(self, facts: JobFacts) -> JobTables:
        """Compile against the job file's ``facts`` into the tables the job needs
        (`framework.config.pipeline.CompilesToJob`)."""
        return self.compile(facts).tables()

    def compile(self, facts: JobFacts) -> Plan:
        """The `Plan` of this pipeline in a job declaring ``facts``."""
        from framework.pipelines.plan import compile_plan

        return compile_plan(self.nodes, facts)


class Stream(Generic[K, V]):
    """Records with keys ``K`` and values ``V`` flowing through a pipeline. Functions given
    to operators take ``(key, value)`` (``*_values`` operators: the value alone)."""

    __slots__ = ("node", "pipeline")

    def __init__(self, pipeline: Pipeline, node: Node) -> None:
        self.pipeline = pipeline
        self.node = node

    def _then(self, op: str, /, *others: Stream[Any, Any], **args: Any) -> Node:
        for other in others:
            if other.pipeline is not self.pipeline:
                raise PipelineError(f"{op}() at {caller()} combines streams of two "
                                    "pipelines; build one Pipeline per job")
        return self.pipeline.add(op, (self.node, *(o.node for o in others)), caller(),
                                 **args)

    # -- stateless ----------------------------------------------------------------------

    def map(self, fn: Callable[[K, V], tuple[K2, V2]]) -> Stream[K2, V2]:
        """``(key, value) -> (new key, new value)`` per record. New keys are not
        repartitioned: a stateful operator after it needs `partition_by` first."""
        return Stream(self.pipeline, self._then("map", fn=fn))

    def map_values(self, fn: Callable[[V], V2]) -> Stream[K, V2]:
        """``value -> new value`` per record; the key stays."""
        return Stream(self.pipeline, self._then("map_values", fn=fn))

    def filter(self, fn: Callable[[K, V], bool]) -> Stream[K, V]:
        """Only the records for which ``fn(key, value)`` is true."""
        return Stream(self.pipeline, self._then("filter", fn=fn))

    def flat_map(self, fn: Callable[[K, V], Iterable[tuple[K2, V2]]]) -> Stream[K2, V2]:
        """Zero or more ``(key, value)`` records per record (each keeps its timestamp)."""
        return Stream(self.pipeline, self._then("flat_map", fn=fn))

    def flat_map_values(self, fn: Callable[[V], Iterable[V2]]) -> Stream[K, V2]:
        """Zero or more values per record, each with the record's key."""
        return Stream(self.pipeline, self._then("flat_map_values", fn=fn))

    def peek(self, fn: Callable[[K, V], object]) -> Stream[K, V]:
        """Call ``fn(key, value)`` for each record (logging, metrics) and pass it on."""
        return Stream(self.pipeline, self._then("peek", fn=fn))

    def with_timestamp(self, fn: Callable[[K, V], int]) -> Stream[K, V]:
        """Set each record's timestamp (event time, ms) to ``fn(key, value)``: windows and
        joins downstream use it, and records written downstream carry it."""
        return Stream(self.pipeline, self._then("with_timestamp", fn=fn))

    def branch(self, *predicates: Callable[[K, V], bool]) -> list[Stream[K, V]]:
        """Split by the first predicate a record meets: one stream per predicate, then
        one of the records that met none (``len(predicates) + 1`` streams)."""
        if not predicates:
            raise PipelineError(f"branch() at {caller()} needs at least one predicate")
        node = self._then("branch", predicates=tuple(predicates))
        return [Stream(self.pipeline, self.pipeline.add("branch_port", (node,), node.where,
                                                           index=i))
                for i in range(len(predicates) + 1)]

    def merge(self, *others: Stream[K, V]) -> Stream[K, V]:
        """The records of this stream and of ``others``, each in its own order."""
        if not others:
            raise PipelineError(f"merge() at {caller()} needs at least one other stream")
        return Stream(self.pipeline, self._then("merge", *others))

    def process(self, step: Callable[[], Step[K, V, K2, V2]], *, stores: Sequence[str] = (),
                same_keys: bool = False) -> Stream[K2, V2]:
        """A custom step: ``step()`` (a `Step` class, or a function making one) is called
        once per task, its ``init`` given the task's context, then ``process(key, value,
        emit)`` per record. ``stores`` are the stores it opens (declared for it, with
        changelogs). ``same_keys=True`` promises it emits only with the key it was
        given, so stateful operators may follow without `partition_by`."""
        return Stream(self.pipeline, self._then("process", factory=step, stores=tuple(stores),
                                                 same_keys=same_keys))

    # -- re-keying ----------------------------------------------------------------------

    def partition_by(self, fn: Callable[[K, V], K2], *, name: str) -> Stream[K2, V]:
        """Re-key each record to ``fn(key, value)`` and move it to its new key's task
        through the intermediate stream ``<metadata system>.<job>-<name>-repartition``,
        which sampan declares and creates (declare it in the job file to change its
        partitions, serdes or retention). ``name`` keeps that stream's name stable as the
        code changes."""
        sink = self._then("partition_by", fn=fn, name=name)
        root = self.pipeline.add("intermediate", (), sink.where, name=name, sink=sink)
        sink.args["root"] = root
        return Stream(self.pipeline, root)

    # -- per-key state ------------------------------------------------------------------

    @overload
    def aggregate(self, initial: Callable[[], A], add: Callable[[A, V], A], *,
                  store: str) -> Stream[K, A]: ...

    @overload
    def aggregate(self, initial: Callable[[], A], add: Callable[[A, V], A], *, store: str,
                  result: Callable[[A, V], R]) -> Stream[K, R]: ...

    def aggregate(self, initial: Callable[[], A], add: Callable[[A, V], A], *, store: str,
                  result: Callable[[A, V], Any] | None = None) -> Stream[K, Any]:
        """Per key, ``add(aggregate, value)`` from ``initial()``, kept in the store
        ``store``; emits the new aggregate after every record (an aggregate of None
        deletes the key) — or ``result(new aggregate, value)`` when given, to pass on
        something of the record with it."""
        return Stream(self.pipeline, self._then("aggregate", initial=initial, add=add,
                                                 store=store, result=result))

    @overload
    def reduce(self, fn: Callable[[V, V], V], *, store: str) -> Stream[K, V]: ...

    @overload
    def reduce(self, fn: Callable[[V, V], V], *, store: str,
               result: Callable[[V, V], R]) -> Stream[K, R]: ...

    def reduce(self, fn: Callable[[V, V], V], *, store: str,
               result: Callable[[V, V], Any] | None = None) -> Stream[K, Any]:
        """Per key, ``fn(previous, value)`` (the first value as it is), kept in ``store``;
        emits the new value after every record (``result(new value, value)`` when
        given)."""
        return Stream(self.pipeline, self._then("reduce", fn=fn, store=store, result=result))

    @overload
    def count(self, *, store: str) -> Stream[K, int]: ...

    @overload
    def count(self, *, store: str, result: Callable[[int, V], R]) -> Stream[K, R]: ...

    def count(self, *, store: str,
              result: Callable[[int, V], Any] | None = None) -> Stream[K, Any]:
        """Per key, how many records it had, kept in ``store``; emits the new count after
        every record — or ``result(new count, value)`` when given (word count:
        ``result=lambda n, line: {"count": n, "seq": line["seq"]}``)."""
        return Stream(self.pipeline, self._then("count", store=store, result=result))

    def window(self, kind: WindowKind, reducer: Reducer | Mapping[str, Reducer], *,
               store: str, event_time: EventTimeSource = "records",
               emit: Literal["close", "update"] = "close", late: LatePolicy = "count",
               late_stream: str | None = None) -> Stream[K, WindowResult]:
        """Per key, `framework.windows.Windows` of ``kind`` (tumbling, hopping, session)
        folding values with ``reducer`` (``count()``, ``sum_of(...)``, a dict of them) in
        event time — the records' timestamps (`with_timestamp` sets them) — kept in
        ``store``. Emits each window's `WindowResult` when it closes (``emit="update"``:
        also after each change); written to a stream, a result is its ``as_value()``.
        ``event_time="markers"`` closes windows by the watermark records of the stream
        read (see docs/windows.md); it needs the window to read a source."""
        return Stream(self.pipeline, self._then(
            "window", kind=kind, reducer=reducer, store=store, event_time=event_time,
            emit=emit, late=late, late_stream=late_stream))

    def join(self, other: Stream[K, V2], joiner: Callable[[V, V2], R], *, before_ms: int,
             after_ms: int, store: str, grace_ms: int = 0,
             event_time: EventTimeSource = "records") -> Stream[K, R]:
        """Records of this stream and ``other`` with equal keys whose timestamps ``tl``
        (this) and ``tr`` (other) meet ``tl - before_ms <= tr <= tl + after_ms``, joined
        by ``joiner(value, other value)`` once, when the later of the two arrives
        (`framework.windows.IntervalJoin`, state in ``store``). Both streams must be
        co-partitioned: read from a source or `partition_by` with the same partition
        count, keys unchanged since."""
        return Stream(self.pipeline, self._then(
            "join", other, joiner=joiner, before_ms=before_ms, after_ms=after_ms,
            store=store, grace_ms=grace_ms, how="inner", event_time=event_time))

    def left_join(self, other: Stream[K, V2], joiner: Callable[[V, V2 | None], R], *,
                  before_ms: int, after_ms: int, store: str, grace_ms: int = 0,
                  event_time: EventTimeSource = "records") -> Stream[K, R]:
        """`join`, and each record of this stream that joined nothing, with None, once
        the watermark shows nothing can join it any more."""
        return Stream(self.pipeline, self._then(
            "join", other, joiner=joiner, before_ms=before_ms, after_ms=after_ms,
            store=store, grace_ms=grace_ms, how="left", event_time=event_time))

    def join_table(self, table: Table[K, V2], joiner: Callable[[V, V2], R]) -> Stream[K, R]:
        """``joiner(value, the table's value for the key)`` per record whose key the
        table holds when the record is processed; records of keys it lacks are dropped."""
        return self._join_table(table, joiner, "inner")

    def left_join_table(self, table: Table[K, V2],
                        joiner: Callable[[V, V2 | None], R]) -> Stream[K, R]:
        """`join_table`, with None for the keys the table lacks."""
        return self._join_table(table, joiner, "left")

    def _join_table(self, table: Table[K, V2], joiner: Any, how: str) -> Stream[K, R]:
        if table.pipeline is not self.pipeline:
            raise PipelineError(f"join_table() at {caller()} joins a table of another "
                                "pipeline; build one Pipeline per job")
        node = self._then("join_table", joiner=joiner, how=how, table=table.node)
        return Stream(self.pipeline, node)

    # -- sinks --------------------------------------------------------------------------

    def to(self, stream: str) -> None:
        """Write every record to ``stream`` (declared in the job file), partitioned by
        key, with its timestamp; a `WindowResult` is written as its ``as_value()``."""
        self._then("to", stream=stream)


class Table(Generic[K, V]):
    """A stream materialised per key in a store (`Pipeline.table`)."""

    __slots__ = ("node", "pipeline")

    def __init__(self, pipeline: Pipeline, node: Node) -> None:
        self.pipeline = pipeline
        self.node = node

    @property
    def store(self) -> str:
        """The store holding it: ``context.store(name)`` in a custom step reads it, as
        would an interactive query."""
        return str(self.node.args["store"])


class Emit(Generic[K, V]):
    """What a `Step` sends records downstream with: ``emit(key, value)`` (the record keeps
    the timestamp of the one being processed unless ``timestamp`` is given)."""

    timestamp: int | None = None
    """The timestamp of the record being processed (None in ``window``)."""

    @property
    def envelope(self) -> Envelope | None:
        """The record being processed as its stream delivered it — stream partition,
        offset, key, value — (None in ``window``). Watermark records reach a step too,
        unless a window or join with ``event_time="markers"`` follows it: a step keeping
        its own event time (`framework.windows.watermarks.Watermarks`) reads them here."""
        return None

    @property
    def watermark(self) -> int | None:
        """The watermark of the window or join this step follows in its stage (None: it
        follows none, or no watermark yet): what a step's ``window`` expires its own state
        by."""
        return None

    def __call__(self, key: K, value: V, timestamp: int | None = None) -> None:
        raise NotImplementedError


class Step(Generic[K, V, K2, V2]):
    """A custom step of a pipeline (`Stream.process`), like a `framework.StreamTask`:
    override `process`; `init`, `window` and `close` are optional. One instance per
    task."""

    def init(self, context: TaskContext) -> None:
        """Called once before the first record, with the task's stores restored: open
        the stores named in ``process(..., stores=[...])`` with ``context.store(name)``."""

    def process(self, key: K, value: V, emit: Emit[K2, V2]) -> None:
        """Handle one record; ``emit`` as many as wanted downstream."""
        raise NotImplementedError(f"{type(self).__name__} must implement process()")

    def window(self, emit: Emit[K2, V2]) -> None:
        """Called every ``job.window_interval_ms`` when overridden."""

    def close(self) -> None:
        """Called once when the worker stops cleanly."""
