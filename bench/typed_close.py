"""A hopping count's close with typed states, for `bench.mypyc_close` to compile with mypyc.

The same walk as `framework.windows.layouts._close_grid` for panes of ``[start, count]``
pairs (width 2, a lone `count`), with the state typed ``list[int]``, the merge inline
and each result made as the product makes it (``tuple.__new__`` of the result type):
what a compiled build of typed states would run. An experiment, not product code: the
product's close stays the generic one.
"""

from __future__ import annotations

from typing import Any

Kept = tuple[str, list[int], int]


def close_count(taken: list[tuple[int, str]], states: dict[str, list[int]], closed: int,
                bound: int, size: int, advance: int, result: type[tuple[Any, ...]]
                ) -> tuple[list[Any], list[Kept], list[str], list[int]]:
    """(results, kept rows, gone keys, cuts) of a close at ``bound`` after one at
    ``closed``, as `_close_grid` returns them."""
    new = tuple.__new__
    results: list[Any] = []
    kept: list[Kept] = []
    gone: list[str] = []
    cuts: list[int] = []
    after = closed - closed % advance + advance  # the first window end not emitted yet
    if after < size:
        after = size
    for item in taken:
        text = item[1]
        state = states.get(text)
        if not state:
            gone.append(text)
            continue
        n = len(state)
        end = state[0] + advance
        if end < after:
            end = after
        low = 0
        key = ""
        while end <= bound:
            start = end - size
            while low < n and state[low] < start:
                low += 2
            if low == n:
                break
            if state[low] >= end:  # no pane in this window: on to the next pane's first
                end = state[low] + advance
                continue
            total = state[low + 1]
            high = low + 2
            while high < n and state[high] < end:
                total += state[high + 1]
                high += 2
            if not key:
                key = text[1:]
            results.append(new(result, (key, start, end, total, True)))
            end += advance
        i = low
        while i < n and state[i] + size <= bound:
            i += 2
        if i == n:
            gone.append(text)
            continue
        end = state[i] - size + advance
        end = (end if end > 0 else 0) + size
        if end <= bound:
            end = bound - bound % advance + advance
        kept.append((text, state, end))
        cuts.append(i)
    return results, kept, gone, cuts
