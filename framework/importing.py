"""Import user code named ``"module:attribute"`` from a job's folder.

The lowest layer of loading what a job file names: the config imports serdes and
expansion algorithms through it at load time, so it imports no task API
(`framework.api.load_task_class` loads task classes on top of it). Callers turn the
`ImportSpecError` into their own error type (`ConfigError`, `TaskLoadError`) with the key
and file it came from.
"""

from __future__ import annotations

import importlib
import json
import re
import sys
from difflib import get_close_matches
from pathlib import Path
from typing import Any, Protocol

from framework.errors import ConfigError
from groupers.expansion import DefaultPartitionExpansionAlgorithm, PartitionExpansionAlgorithm

__all__ = [
    "SPEC_PATTERN",
    "ImportSpecError",
    "JobCode",
    "import_spec",
    "load_expansion_algorithm",
    "make_expansion_algorithm",
]

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
SPEC_PATTERN = re.compile(rf"{_NAME}(\.{_NAME})*:{_NAME}")
"""``module.path:Name`` — how a job file names user code."""


class ImportSpecError(Exception):
    """``spec`` could not be imported; the message says why and how to fix it."""


def import_spec(spec: str, search_path: Path | None = None) -> Any:
    """The object ``"module:attribute"`` names, importing ``module`` with ``search_path``
    first on ``sys.path`` (it stays there, as a script's folder does, so the module's own
    sibling imports keep working)."""
    if not SPEC_PATTERN.fullmatch(spec):
        raise ImportSpecError(f'expected "module:Name", got {_q(spec)}')
    module_name, _, attribute = spec.partition(":")
    if search_path is not None:
        _put_first_on_path(search_path)
        _forget_if_shadowed(module_name, search_path)
    where = f" (searched {search_path} and sys.path)" if search_path is not None else ""
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name is not None and f"{module_name}.".startswith(f"{error.name}."):
            raise ImportSpecError(
                f"no module named {_q(module_name)}{where}; put {module_name.replace('.', '/')}.py "
                "next to the job file or install the package that provides it"
            ) from error
        raise ImportSpecError(
            f"importing module {_q(module_name)} failed: {error}; install {_q(error.name or '?')}"
        ) from error
    except Exception as error:
        raise ImportSpecError(
            f"importing module {_q(module_name)} raised {type(error).__name__}: {error}"
        ) from error
    try:
        return getattr(module, attribute)
    except AttributeError:
        names = [n for n in dir(module) if not n.startswith("_")]
        close = get_close_matches(attribute, names, n=1)
        hint = f'; did you mean "{module_name}:{close[0]}"?' if close else ""
        raise ImportSpecError(
            f"module {_q(module_name)} ({getattr(module, '__file__', '?')}) has no "
            f"attribute {_q(attribute)}{hint}"
        ) from None


def _q(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _put_first_on_path(folder: Path) -> None:
    entry = str(folder)
    if entry not in sys.path:
        sys.path.insert(0, entry)
    importlib.invalidate_caches()  # the folder's files may be newer than the finder's listing


def _forget_if_shadowed(module_name: str, folder: Path) -> None:
    """Drop a cached module of the same name from another folder, so this job's file wins
    (several jobs in one process, e.g. a test session, may each have a ``tasks.py``)."""
    top = module_name.split(".")[0]
    cached = sys.modules.get(top)
    if cached is None:
        return
    candidates = (folder / f"{top}.py", folder / top / "__init__.py")
    local = next((c for c in candidates if c.is_file()), None)
    if local is None:
        return
    loaded = getattr(cached, "__file__", None)
    if loaded is not None and Path(loaded).resolve() == local.resolve():
        return
    for name in [n for n in sys.modules if n == top or n.startswith(f"{top}.")]:
        del sys.modules[name]


def make_expansion_algorithm(spec: str, root: Path) -> PartitionExpansionAlgorithm:
    """Import and instantiate a custom algorithm; `ConfigError` (message without the key
    path: callers add it) when it is missing or lacks ``partition_before_expansion``."""
    try:
        target = import_spec(spec, root)
        instance = target() if isinstance(target, type) else target
    except ImportSpecError as error:
        raise ConfigError(str(error)) from None
    except Exception as error:
        raise ConfigError(f"{spec}() raised {type(error).__name__}: {error}") from None
    if not isinstance(instance, PartitionExpansionAlgorithm):
        raise ConfigError(
            f"{spec} does not implement partition_before_expansion(partition, "
            "current_count, initial_count) -> int"
        )
    return instance


class JobCode(Protocol):
    """What a job file names as code (a `framework.config.JobConfig` is one): the task,
    the expansion algorithm, and the file whose folder they are imported from."""

    @property
    def task(self) -> str: ...

    @property
    def expansion_algorithm_spec(self) -> str: ...

    @property
    def path(self) -> Path: ...

    @property
    def root(self) -> Path: ...


def load_expansion_algorithm(config: JobCode) -> PartitionExpansionAlgorithm:
    """A new instance of ``job.expansion_algorithm`` (SEP-5's default unless named)."""
    if config.expansion_algorithm_spec == "default":
        return DefaultPartitionExpansionAlgorithm()
    return make_expansion_algorithm(config.expansion_algorithm_spec, config.root)
