"""Which streams are sampan's own, by one rule on every system: a job's coordinator
stream (``__sampan-<job>-coordinator``), its checkpoints and fences on Kafka
(``__sampan-<job>-checkpoints``, ``-fences``), anything else named ``__sampan-…``, and
its stores' changelogs (``<job>-<store>-changelog``). `sampan streams list` hides them
unless ``--all``, which marks each with what it is."""

from __future__ import annotations

import re

from framework.config import JobConfig

__all__ = ["internal_role"]

_OWN = re.compile(r"__sampan-(?P<job>.+)-(?P<kind>coordinator|checkpoints|fences)")
_WHAT = {"coordinator": "coordinator stream", "checkpoints": "checkpoints",
         "fences": "fences"}


def internal_role(config: JobConfig, system: str, stream: str) -> str | None:
    """What ``stream`` of ``system`` is to sampan (``coordinator stream of job
    'views'``), or None for a stream of the user's. A stream the job file declares is
    the user's even when its name looks like a changelog."""
    own = _OWN.fullmatch(stream)
    if own is not None:
        return f"{_WHAT[own['kind']]} of job {own['job']!r}"
    if stream.startswith("__sampan-"):
        return "sampan's own"
    for store in config.logged_stores:
        if config.changelog_ref(store) == (system, stream):
            return f"changelog of store {store!r} of job {config.name!r}"
    if stream.endswith("-changelog") and f"{system}.{stream}" not in config.streams:
        return "a store's changelog"
    return None
