"""How much a compiled build of typed window states would save: one hopping count's close,
three ways, on the same states.

- **product**: `Panes.close_all` (`framework.windows.layouts._close_grid`), interpreted, as
  a worker runs it for ``Hopping(5 min, 1 min)`` and `count()`;
- **typed**: `bench/typed_close.py` (the same walk, the state typed ``list[int]``, the merge
  inline, the same `WindowResult` per window), interpreted;
- **typed, mypyc**: that module compiled by mypyc into a temporary folder.

States: ``--keys`` keys (2,500: one task's share of `bench.windows`), each with a pane of
1 to 4 records in 4 of every 5 of its last six minutes; each close takes every key, as
the close at a minute's end does in `bench.windows`' hopping job. Nothing is changed by a
close (the cuts are returned, not applied), so the passes repeat it. Prints CPU ns per
window emitted, the least of ``--repeat`` runs of ``--passes`` closes. Needs a C compiler.

Run: ``.venv/bin/python -m bench.mypyc_close``.
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from framework.coordinator.supervisor import die_with_parent
from framework.windows import Hopping, WindowResult, count
from framework.windows.layouts import Panes, layout_for

SIZE, ADVANCE = 300_000, 60_000
SOURCE = Path(__file__).with_name("typed_close.py")


def states(keys: int) -> dict[str, list[Any]]:
    """Key text → panes ``[start, count, …]`` (see the module)."""
    rng = random.Random(3)
    made: dict[str, list[Any]] = {}
    for k in range(keys):
        state: list[Any] = []
        for minute in range(6):
            if rng.random() < 0.8:
                state += [minute * ADVANCE, rng.randint(1, 4)]
        made[f"skey-{k:05d}"] = state
    return made


def load(path: Path, name: str) -> ModuleType:
    """The module at ``path`` (a .py or a compiled extension), imported as ``name``."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def compiled(folder: Path) -> ModuleType:
    """`typed_close` compiled by mypyc in ``folder``."""
    shutil.copy(SOURCE, folder / SOURCE.name)
    mypyc = Path(sys.executable).with_name("mypyc")
    subprocess.run([str(mypyc), SOURCE.name], cwd=folder, check=True,
                   stdout=subprocess.DEVNULL, preexec_fn=die_with_parent)  # dies with the bench
    built = next(folder.glob("typed_close.*.so"))
    return load(built, "typed_close")


def timed(close: Callable[[], int], passes: int, repeat: int) -> tuple[float, int]:
    """(least CPU ns per window emitted over ``repeat`` runs, windows per close)."""
    best, emitted = float("inf"), 0
    for _ in range(repeat):
        started = time.process_time()
        for _ in range(passes):
            emitted = close()
        best = min(best, (time.process_time() - started) / passes)
    return best / emitted * 1e9, emitted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=2_500)
    parser.add_argument("--passes", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    made = states(args.keys)
    taken = [(0, text) for text in made]
    closed, bound = SIZE - 1, SIZE + ADVANCE
    layout = layout_for(Hopping(size_ms=SIZE, advance_ms=ADVANCE), count(), None)
    assert isinstance(layout, Panes)

    def product() -> int:
        return len(layout.close_all(taken, made.get, closed, bound, layout.finish,
                                    WindowResult, [])[0])

    interpreted = load(SOURCE, "typed_close_py")
    with tempfile.TemporaryDirectory(prefix="sampan-bench-mypyc-") as folder:
        native = compiled(Path(folder))
        ways: dict[str, Callable[[], int]] = {
            "product": product,
            "typed": lambda: len(interpreted.close_count(taken, made, closed, bound, SIZE,
                                                         ADVANCE, WindowResult)[0]),
            "typed, mypyc": lambda: len(native.close_count(taken, made, closed, bound, SIZE,
                                                           ADVANCE, WindowResult)[0])}
        same = {name: sorted(map(tuple, (r[:4] for r in close_results)))
                for name, close_results in (
                    ("product", layout.close_all(taken, made.get, closed, bound,
                                                 layout.finish, WindowResult, [])[0]),
                    ("typed, mypyc", native.close_count(taken, made, closed, bound, SIZE,
                                                        ADVANCE, WindowResult)[0]))}
        assert same["product"] == same["typed, mypyc"], "the closes differ"
        print(f"{args.keys:,} keys, hopping 5 min / 1 min, count(); least of {args.repeat} "
              f"runs of {args.passes} closes, CPU ns per window emitted")
        for name, close in ways.items():
            ns, emitted = timed(close, args.passes, args.repeat)
            print(f"  {name:<14} {ns:>7,.0f} ns  ({emitted:,} windows per close)", flush=True)


if __name__ == "__main__":
    main()
