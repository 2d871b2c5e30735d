"""Where drillable examples come from: installed ones (entry points) or a folder you name.

An example is a folder holding a job file (``job.toml``), the job's task modules and a
``drill.py`` defining ``scenario(options)``. Installed packages register examples under
the entry point group ``sampan.examples``, each naming the package whose folder is the
example (sampan's own, the repository's ``examples/`` folder installed as
``sampan_examples``: ``wordcount = "sampan_examples.wordcount"``); ``sampan drill
--example-dir DIR`` drills a folder of your own. The framework never looks for examples
relative to its own files, so an installed wheel drills exactly as a source checkout does.
"""

from __future__ import annotations

from importlib import import_module, metadata
from pathlib import Path

from framework.errors import ConfigError

__all__ = ["ENTRY_POINT_GROUP", "find_example", "installed_examples"]

ENTRY_POINT_GROUP = "sampan.examples"


def installed_examples() -> dict[str, str]:
    """Example name → the package holding it, from every installed distribution."""
    found: dict[str, str] = {}
    for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(entry.name, entry.value)
    return dict(sorted(found.items()))


def _package_folder(name: str, package: str) -> Path:
    try:
        module = import_module(package)
    except ImportError as error:
        raise ConfigError(
            f"--example {name!r}: its package {package!r} (entry point group "
            f"{ENTRY_POINT_GROUP}) does not import: {error}; reinstall the distribution "
            f"that provides it") from error
    if module.__file__ is None:
        raise ConfigError(f"--example {name!r}: package {package!r} has no folder on disk; "
                          f"install it as a regular (not zipped) package")
    return Path(module.__file__).resolve().parent


def find_example(name: str, job_file: str = "job.toml", folder: Path | None = None) -> Path:
    """The folder of example ``name`` (or ``folder`` itself), checked to hold ``drill.py``
    and ``job_file``; `ConfigError` naming the known examples and the fix otherwise."""
    if folder is None:
        installed = installed_examples()
        if name not in installed:
            raise ConfigError(
                f"--example {name!r}: no drillable example of that name; installed: "
                f"{', '.join(installed) or 'none'} (entry point group {ENTRY_POINT_GROUP}). "
                f"For a folder of your own, pass --example-dir DIR")
        folder = _package_folder(name, installed[name])
        what = f"example {name!r}"
    else:
        folder = folder.resolve()
        what = f"--example-dir {folder}"
    if not (folder / "drill.py").is_file():
        where = "" if what.startswith("--example-dir") else f" ({folder})"
        raise ConfigError(f"{what}{where} has no drill.py defining scenario(options) -> "
                          f"Scenario; see docs/drill.md")
    if not (folder / job_file).is_file():
        files = ", ".join(sorted(p.name for p in folder.glob("*.toml"))) or "none"
        raise ConfigError(f"--job {job_file!r}: {what} has no such job file; it has: {files}")
    return folder
