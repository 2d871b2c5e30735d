"""A line about the machine and the load the figures were taken under."""

from __future__ import annotations

import os
import platform
import subprocess


def describe() -> str:
    """CPU model, cores, memory, load average, Python and Java versions."""
    model = "unknown CPU"
    memory_kib = 0
    try:
        with open("/proc/cpuinfo") as cpus:
            model = next((line.split(":", 1)[1].strip() for line in cpus
                          if line.startswith("model name")), model)
        with open("/proc/meminfo") as memory:
            memory_kib = next((int(line.split()[1]) for line in memory
                               if line.startswith("MemTotal")), 0)
    except OSError:
        pass
    try:
        java = subprocess.run(["java", "-version"], capture_output=True, text=True,
                              timeout=60).stderr.splitlines()[0]
    except (OSError, subprocess.TimeoutExpired, IndexError):
        java = "no java"
    return (f"{model}, {os.cpu_count()} cores, {memory_kib / 1024 / 1024:.0f} GiB; "
            f"Linux {platform.release()}; Python {platform.python_version()}; {java}")


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.1f} / {five:.1f} / {fifteen:.1f} (1 / 5 / 15 min)"
