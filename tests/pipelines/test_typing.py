"""A pipeline's record types flow through its operators for mypy: each operator's result
type follows from the function it was given, and a wrong use is a type error (mypy
--strict run on a small module, its findings pinned)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from mypy import api

MODULE = '''\
from typing import Any, TypedDict

from framework.pipelines import Pipeline, Stream
from framework.windows import Tumbling, count


class View(TypedDict):
    page: str
    secs: int


p = Pipeline()
views = p.source("local.views", str, View)
reveal_type(views)
seconds = views.map_values(lambda view: view["secs"])
reveal_type(seconds)
pages = views.map(lambda user, view: (view["page"], user))
reveal_type(pages)
per_page = views.partition_by(lambda user, view: view["page"], name="by-page")
reveal_type(per_page.count(store="views"))
totals = per_page.aggregate(lambda: 0, lambda total, view: total + view["secs"],
                            store="secs")
reveal_type(totals)
reveal_type(per_page.window(Tumbling(size_ms=1000), count(), store="w"))
clicks: Stream[str, float] = p.source("local.clicks")
joined = views.join(clicks, lambda view, amount: (view["page"], amount), before_ms=0,
                    after_ms=10, store="j")
reveal_type(joined)
reveal_type(views.left_join(clicks, lambda view, amount: amount, before_ms=0, after_ms=10,
                            store="l"))
words = p.source("local.lines", str, str).flat_map(
    lambda key, line: [(word, 1) for word in line.split()])
reveal_type(words)

seconds.map_values(lambda secs: secs.upper())
views.filter(lambda user, view: view["sesc"] > 0)
totals.to(42)
views.join(clicks, lambda view, amount: amount + view, before_ms=0, after_ms=10, store="x")
'''

EXPECTED = [
    "Stream[str, TypedDict(m.View, {'page': str, 'secs': int})]",
    "Stream[str, int]",
    "Stream[str, str]",
    "Stream[str, int]",
    "Stream[str, int]",
    "Stream[str, tuple[Any, int, int, Any, bool, "
    "fallback=framework.windows.aggregation.WindowResult]]",
    "Stream[str, tuple[str, float]]",
    "Stream[str, float | None]",
    "Stream[str, int]",
    'error: "int" has no attribute "upper"  [attr-defined]',
    'error: TypedDict "View" has no key "sesc"  [typeddict-item]',
    'error: Argument 1 to "to" of "Stream" has incompatible type "int"; expected "str"  '
    "[arg-type]",
    'error: Unsupported operand types for + ("float" and "View")  [operator]',
]


def test_record_types_flow_through_the_operators_and_a_wrong_use_is_an_error(
        tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(textwrap.dedent(MODULE))
    out, err, status = api.run(["--strict", "--no-error-summary", "--hide-error-context",
                                "--show-error-codes", "--cache-dir", str(tmp_path / "cache"),
                                str(tmp_path / "m.py")])
    revealed = 'note: Revealed type is "framework.pipelines.builder.'
    found = [line.split(": ", 1)[1].removeprefix(revealed).removesuffix('"')
             for line in out.splitlines()]
    assert (found, err, status) == (EXPECTED, "", 1)
