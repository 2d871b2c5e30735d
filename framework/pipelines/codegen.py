"""A compiled plan as Python: one function per stream a task reads, operators fused.

For each root (a source, a table or an intermediate stream) the generator writes one
function taking the record's envelope and the task's collector; the operators after it
are inlined as statements — a filter is an ``if``, a ``flat_map`` a ``for``, a branch an
``if``/``elif`` — calling only the user's functions, the stores and the collector. An
operator reached from several places (a merge, a join) or called back later (what a
window, a join or a custom step emits, on a record or on a window tick) gets a function
of its own. So a record costs one call per root and one per user function, not one per
operator.

The source is compiled once per plan into a factory; `framework.pipelines.task` calls the
factory once per task with that task's stores, windows, joins and steps, which the
generated functions hold as closure variables. ``sampan describe --code`` prints it.
"""

from __future__ import annotations

import linecache
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from framework.api import Envelope
from framework.pipelines.graph import ROOTS, Node
from framework.pipelines.plan import Plan
from framework.windows import WindowResult

__all__ = ["MISSING", "Factory", "GeneratedCode", "generate"]

MISSING = object()
"""What a store's ``get`` returns for a key without a value, in generated code."""

Factory = Callable[[dict[int, Any]], tuple[dict[str, Any], list[tuple[int, Any]]]]
"""``factory(objects)`` → (stream → its root function, [(node id, tick function)])."""

_PASS_THROUGH = frozenset({"filter", "peek", "branch", "branch_port", "merge",
                           "with_timestamp"})
"""Operators whose records keep their value (a `WindowResult` stays one)."""
_EMITTING = frozenset({"window", "join", "process"})
"""Operators whose results reach what follows them through a function of its own, called
on a record and on a window tick."""


@dataclass(frozen=True)
class GeneratedCode:
    """The generated source and its compiled factory."""

    source: str
    factory: Factory


@dataclass(frozen=True)
class _At:
    """The variables holding the current record in generated code."""

    key: str
    value: str
    time: str
    env: str
    exact: bool
    """Whether key, value and time are still those of ``env``."""

    def envelope(self) -> str:
        if self.exact:
            return self.env
        return (f"Envelope({self.env}.ssp, {self.env}.offset, {self.key}, {self.value}, "
                f"{self.time}, {self.env}.headers)")


_SHARED_AT = _At("k", "v", "t", "env", False)


class _Writer:
    """Writes the factory's source for one plan."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.lines: list[str] = []
        self.names: dict[str, Any] = {"Envelope": Envelope, "WR": WindowResult,
                                      "MISSING": MISSING}
        self.results: dict[int, bool] = {}  # node id -> may carry a WindowResult
        for node in plan.nodes:
            self.results[node.id] = node.kind == "window" or (
                node.kind in _PASS_THROUGH and any(self.results[p.id] for p in node.parents))

    def fn(self, name: str, value: Any) -> str:
        """A user function (or other object) as a global of the generated module."""
        self.names[name] = value
        return name

    def line(self, indent: int, text: str) -> None:
        self.lines.append("    " * indent + text)

    def write(self) -> str:
        plan = self.plan
        self.line(0, "def factory(rt):")
        for node in plan.nodes:
            for text in self._bindings(node):
                self.line(1, text)
        for node in plan.nodes:
            if node.kind in ROOTS:
                self._root(node)
            elif node.kind == "merge":
                self._shared(f"m{node.id}", node)
            elif node.kind == "join":
                self._join(node)
            if node.kind in _EMITTING:
                self._shared(f"a{node.id}", node)
                self._tick(node)
        for node in plan.nodes:
            if node.kind == "process":
                self.line(1, f"E{node.id}.after = a{node.id}")
        roots = ", ".join(f"{plan.streams[n.id]!r}: r{n.id}" for n in plan.nodes
                          if n.kind in ROOTS)
        ticks = ", ".join(f"({n.id}, tick{n.id})" for n in plan.nodes if n.kind in _EMITTING)
        self.line(1, f"return {{{roots}}}, [{ticks}]")
        return "\n".join(self.lines) + "\n"

    def _bindings(self, node: Node) -> Iterator[str]:
        """The factory's lines binding ``node``'s per-task object to a closure variable."""
        i = node.id
        if node.kind in ("aggregate", "count", "reduce", "table"):
            yield f"ST{i} = rt[{i}]"
        elif node.kind == "join_table":
            yield f"T{i} = rt[{node.args['table'].id}]"
        elif node.kind == "window":
            yield f"W{i}, ET{i} = rt[{i}]"
        elif node.kind == "join":
            yield f"J{i}, ET{i} = rt[{i}]"
        elif node.kind == "process":
            yield f"P{i}, E{i} = rt[{i}]"

    # -- functions ----------------------------------------------------------------------

    def _root(self, node: Node) -> None:
        i = node.id
        self.line(1, f"def r{i}(env, c):  # reads {self.plan.streams[i]}")
        if node.kind == "table":
            self.line(2, f"ST{i}.put(env.key, env.value)")
            return
        self.line(2, f"k{i} = env.key; v{i} = env.value; t{i} = env.timestamp")
        markers = [n for n in self.plan.nodes if n.kind in ("window", "join")
                   and n.args["event_time"] == "markers" and _reaches(node, n)]
        if markers:
            self.line(2, f'if type(v{i}) is dict and "watermark" in v{i}:  # to its clocks')
            for target in markers:
                if target.kind == "window":
                    self._window_results(target, "env", 3)
                else:
                    self.line(3, f"j{target.id}(env, c)")
            self.line(3, "return")
        before = len(self.lines)
        self._children(node, _At(f"k{i}", f"v{i}", f"t{i}", "env", True), 2)
        if len(self.lines) == before:
            self.line(2, "pass")

    def _shared(self, name: str, node: Node) -> None:
        self.line(1, f"def {name}(k, v, t, env, c):")
        before = len(self.lines)
        self._children(node, _SHARED_AT, 2)
        if len(self.lines) == before:
            self.line(2, "pass")

    def _join(self, node: Node) -> None:
        i = node.id
        joiner = self.fn(f"F{i}", node.args["joiner"])
        self.line(1, f"def j{i}(e, c):")
        self.line(2, f"for r in J{i}.process(e, c):")
        self.line(3, f"a{i}(r.key, {joiner}(r.left, r.right), r.left_ts if r.right_ts is None "
                     "else max(r.left_ts, r.right_ts), e, c)")

    def _tick(self, node: Node) -> None:
        i = node.id
        self.line(1, f"def tick{i}(c):")
        if node.kind == "window":
            self.line(2, f"ET{i}.refresh_idle()")
            self.line(2, f"for r in W{i}.close_due(c):")
            self.line(3, f"a{i}(r.key, r, r.end - 1, None, c)")
        elif node.kind == "join":
            self.line(2, f"ET{i}.refresh_idle()")
            self.line(2, f"for r in J{i}.expire_due(c):")
            self.line(3, f"a{i}(r.key, F{i}(r.left, r.right), r.left_ts, None, c)")
        else:
            self.line(2, f"E{i}.c = c; E{i}.timestamp = None; E{i}.env = None")
            self.line(2, f"P{i}.window(E{i})")

    def _window_results(self, node: Node, envelope: str, indent: int) -> None:
        i = node.id
        self.line(indent, f"for r in W{i}.process({envelope}, c):")
        self.line(indent + 1, f"a{i}(r.key, r, r.end - 1, {envelope}, c)")

    # -- statements ---------------------------------------------------------------------

    def _children(self, node: Node, at: _At, indent: int) -> None:
        for child in node.children:
            if child.kind == "merge":
                self.line(indent, f"m{child.id}({at.key}, {at.value}, {at.time}, {at.env}, c)")
            elif child.kind == "join":
                self.line(indent, f"j{child.id}({at.envelope()}, c)")
            else:
                self._statement(child, at, indent)

    def _statement(self, node: Node, at: _At, indent: int) -> None:
        i, kind, args = node.id, node.kind, node.args
        k, v, t = at.key, at.value, at.time
        if kind == "filter":
            self.line(indent, f"if {self.fn(f'F{i}', args['fn'])}({k}, {v}):")
            self._block(node, at, indent + 1)
        elif kind == "peek":
            self.line(indent, f"{self.fn(f'F{i}', args['fn'])}({k}, {v})")
            self._children(node, at, indent)
        elif kind == "map":
            self.line(indent, f"k{i}, v{i} = {self.fn(f'F{i}', args['fn'])}({k}, {v})")
            self._children(node, _At(f"k{i}", f"v{i}", t, at.env, False), indent)
        elif kind == "map_values":
            self.line(indent, f"v{i} = {self.fn(f'F{i}', args['fn'])}({v})")
            self._children(node, _At(k, f"v{i}", t, at.env, False), indent)
        elif kind == "flat_map":
            self.line(indent, f"for k{i}, v{i} in {self.fn(f'F{i}', args['fn'])}({k}, "
                              f"{v}):")
            self._block(node, _At(f"k{i}", f"v{i}", t, at.env, False), indent + 1)
        elif kind == "flat_map_values":
            self.line(indent, f"for v{i} in {self.fn(f'F{i}', args['fn'])}({v}):")
            self._block(node, _At(k, f"v{i}", t, at.env, False), indent + 1)
        elif kind == "with_timestamp":
            self.line(indent, f"t{i} = {self.fn(f'F{i}', args['fn'])}({k}, {v})")
            self._children(node, _At(k, v, f"t{i}", at.env, False), indent)
        elif kind == "branch":
            self._branch(node, at, indent)
        elif kind in ("to", "partition_by"):
            value = (f"({v}.as_value() if type({v}) is WR else {v})"
                     if any(self.results[p.id] for p in node.parents) else v)
            key = k if kind == "to" else f"{self.fn(f'F{i}', args['fn'])}({k}, {v})"
            self.line(indent, f"c.send({self.plan.streams[i]!r}, {key}, {value}, "
                              f"timestamp={t})")
        elif kind == "aggregate":
            initial = self.fn(f"INIT{i}", args["initial"])
            add = self.fn(f"ADD{i}", args["add"])
            self.line(indent, f"a{i} = ST{i}.get({k}, MISSING)")
            self.line(indent, f"v{i} = {add}({initial}() if a{i} is MISSING else a{i}, {v})")
            self.line(indent, f"ST{i}.put({k}, v{i})")
            self._aggregated(node, at, indent)
        elif kind == "count":
            self.line(indent, f"v{i} = (ST{i}.get({k}) or 0) + 1")
            self.line(indent, f"ST{i}.put({k}, v{i})")
            self._aggregated(node, at, indent)
        elif kind == "reduce":
            fn = self.fn(f"F{i}", args["fn"])
            self.line(indent, f"a{i} = ST{i}.get({k}, MISSING)")
            self.line(indent, f"v{i} = {v} if a{i} is MISSING else {fn}(a{i}, {v})")
            self.line(indent, f"ST{i}.put({k}, v{i})")
            self._aggregated(node, at, indent)
        elif kind == "join_table":
            joiner = self.fn(f"F{i}", args["joiner"])
            if args["how"] == "left":
                self.line(indent, f"v{i} = {joiner}({v}, T{i}.get({k}))")
                self._children(node, _At(k, f"v{i}", t, at.env, False), indent)
            else:
                self.line(indent, f"tv{i} = T{i}.get({k})")
                self.line(indent, f"if tv{i} is not None:")
                self.line(indent + 1, f"v{i} = {joiner}({v}, tv{i})")
                self._children(node, _At(k, f"v{i}", t, at.env, False), indent + 1)
        elif kind == "window":
            self._window_results(node, at.envelope(), indent)
        elif kind == "process":
            self.line(indent, f"E{i}.timestamp = {t}; E{i}.c = c; E{i}.env = {at.env}")
            self.line(indent, f"P{i}.process({k}, {v}, E{i})")
        else:  # pragma: no cover - every kind the builder makes is handled above
            raise AssertionError(f"no code for {kind}")

    def _aggregated(self, node: Node, at: _At, indent: int) -> None:
        """What follows an aggregation of ``v<id>``: the aggregate, or ``result(aggregate,
        value)`` when the operator was given one."""
        i = node.id
        out = f"v{i}"
        if node.args.get("result") is not None:
            out = f"o{i}"
            self.line(indent, f"{out} = {self.fn(f'RES{i}', node.args['result'])}(v{i}, "
                              f"{at.value})")
        self._children(node, _At(at.key, out, at.time, at.env, False), indent)

    def _block(self, node: Node, at: _At, indent: int) -> None:
        before = len(self.lines)
        self._children(node, at, indent)
        if len(self.lines) == before:
            self.line(indent, "pass")

    def _branch(self, node: Node, at: _At, indent: int) -> None:
        i = node.id
        ports = sorted(node.children, key=lambda p: p.args["index"])
        for index, port in enumerate(ports):
            if index < len(ports) - 1:
                predicate = self.fn(f"B{i}_{index}", node.args["predicates"][index])
                keyword = "if" if index == 0 else "elif"
                self.line(indent, f"{keyword} {predicate}({at.key}, {at.value}):")
            else:
                self.line(indent, "else:")
            self._block(port, at, indent + 1)


def _reaches(root: Node, target: Node) -> bool:
    """Whether ``root``'s records reach ``target`` within their stage."""
    work, seen = [target], set()
    while work:
        node = work.pop()
        if node is root:
            return True
        if node.id not in seen:
            seen.add(node.id)
            work.extend(node.parents)
    return False


def generate(plan: Plan, label: str) -> GeneratedCode:
    """The factory of ``plan``'s stage functions; ``label`` names its source in
    tracebacks (``<pipeline label>``), where its lines show."""
    writer = _Writer(plan)
    source = writer.write()
    filename = f"<pipeline {label}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = dict(writer.names)
    exec(compile(source, filename, "exec"), namespace)
    return GeneratedCode(source, namespace["factory"])
