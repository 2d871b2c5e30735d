"""Tables of measured points → matplotlib PNGs (the data → figure half of `bench.curves`).

A `Curve` is a plain table — series name → [(x, y)] — plus its labels; `draw` renders it
with the command and machine in the caption, `save`/`load` keep it as JSON beside the
bench so a figure can be redrawn without rerunning a job.
"""

from __future__ import annotations

import json
import os
import platform
from dataclasses import asdict, dataclass, field
from pathlib import Path

INSTALL = "matplotlib is needed to draw the curves: .venv/bin/pip install -e '.[bench]'"


@dataclass
class Curve:
    """One figure: its series of (x, y) points and what the axes mean."""

    title: str
    x_label: str
    y_label: str
    series: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    log_x: bool = False
    log_y: bool = False

    def add(self, name: str, x: float, y: float) -> None:
        self.series.setdefault(name, []).append((x, y))


def machine() -> str:
    """One line naming the machine and its load average now."""
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    return (f"{platform.node() or 'host'}: {os.cpu_count()} cores, {platform.machine()}, "
            f"Python {platform.python_version()}, load average {load}")


def save(curves: list[Curve], path: Path, command: str, where: str) -> None:
    """The curves as JSON (with the command and machine line) at ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"command": command, "machine": where,
                                "curves": [asdict(c) for c in curves]}, indent=1) + "\n")


def load(path: Path) -> tuple[list[Curve], str, str]:
    """The curves, command and machine line `save` wrote."""
    data = json.loads(path.read_text())
    curves = [Curve(**{**c, "series": {k: [tuple(p) for p in v]
                                       for k, v in c["series"].items()}})
              for c in data["curves"]]
    return curves, data["command"], data["machine"]


def draw(curves: list[Curve], path: Path, command: str, where: str) -> Path:
    """Draw ``curves`` side by side into one PNG at ``path``, captioned with the command
    that measured them and the machine it ran on."""
    try:
        import matplotlib
    except ImportError as missing:
        raise SystemExit(INSTALL) from missing
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(curves), figsize=(5.2 * len(curves), 4.2),
                                squeeze=False)
    for ax, curve in zip(axes[0], curves, strict=True):
        for name, points in curve.series.items():
            ordered = sorted(points)
            ax.plot([p[0] for p in ordered], [p[1] for p in ordered], marker="o", label=name)
        ax.set_title(curve.title, fontsize=10)
        ax.set_xlabel(curve.x_label)
        ax.set_ylabel(curve.y_label)
        if curve.log_x:
            ax.set_xscale("log")
        if curve.log_y:
            ax.set_yscale("log")
        ax.grid(True, alpha=0.3)
        if curve.series:
            ax.legend(fontsize=8)
    figure.text(0.01, 0.01, f"{command}\n{where}", fontsize=7, family="monospace",
                va="bottom")
    figure.tight_layout(rect=(0, 0.08, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
