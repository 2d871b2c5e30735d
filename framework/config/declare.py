"""One declaration per job-file key: the `Setting` a config dataclass field carries.

A key is declared once, on its field: the field gives its name, Python type and default;
``metadata=setting(kind, doc, ...)`` gives how it is read and checked (its `Kind`: type,
bounds, choices, or a named parser such as a serde spec), its meaning, whether it is
required and which system type it belongs to. Validation (`read_table`), the TOML form of
a config (`JobConfig.to_dict`) and the key tables of ``docs/config.md``
(`framework.config.reference`) are all derived from it.

>>> from dataclasses import dataclass, field
>>> from framework.config.kinds import Integer
>>> from framework.config.schema import Problems, Section
>>> @dataclass(frozen=True)
... class Demo:
...     workers: int = field(default=1, metadata=setting(Integer(minimum=1), "Processes."))
>>> problems = Problems()
>>> read_table(Demo, Reading(Section({"workers": 0}, ("demo",), problems)))
{'workers': 1}
>>> for path, message in problems:
...     print(*path, message)
demo workers expected an integer ≥ 1, got 0
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import MISSING, Field, dataclass, fields
from dataclasses import field as dataclass_field
from pathlib import Path
from typing import Any, Protocol

from framework.config.schema import Section

__all__ = [
    "NOT_A_KEY",
    "TABLE",
    "Kind",
    "Reading",
    "Setting",
    "Typed",
    "declared",
    "read_table",
    "setting",
]



class _Unset:
    """`Setting.default` when the field's default is the key's."""

    def __repr__(self) -> str:
        return "UNSET"


_UNSET: Any = _Unset()

NOT_A_KEY: dict[str, Any] = {"derived": True}
"""Field metadata of a derived field (a table's name, the file's path): not a key."""
TABLE: dict[str, Any] = {"table": True}
"""Field metadata of a `JobConfig` field that is a top-level table of the file."""


class Kind(Protocol):
    """How the value of a key is read from TOML, checked and described."""

    @property
    def shown(self) -> str:
        """The accepted values as ``docs/config.md`` writes them (its type column)."""
        ...

    def read(self, reading: Reading, key: str, default: Any) -> Any:
        """The value of ``key`` in ``reading``'s table, else ``default``; a wrong value is
        recorded as a problem (and ``default`` returned)."""
        ...


@dataclass(frozen=True)
class Setting:
    """The declaration of one key, carried in its field's metadata (see `setting`)."""

    kind: Kind
    """How its value is read, checked and described (`framework.config.kinds`)."""
    doc: str
    """Its meaning: the Markdown of the meaning column of ``docs/config.md``."""
    name: str | None = None
    """The key, when it is not the field's name."""
    required: str | None = None
    """An example value, for the message when this required key is missing."""
    when: str | None = None
    """The value of its table's ``type`` key this key belongs to (a system's
    ``"local"`` or ``"kafka"``); None: any."""
    default: Any = _UNSET
    """The key's default when the field's default is its value where the key does not
    apply (a kafka system has no ``path``)."""
    derive: Callable[[Reading], Any] | None = None
    """Computes the default from the keys read before it (``job.metadata_system`` is the
    first input's system); `default_doc` says how, for the docs."""
    default_doc: str | None = None
    """The default column of ``docs/config.md`` when it is not the default's value."""

    def default_of(self, spec: Field[Any]) -> Any:
        """The value this key takes when absent (None for a required key)."""
        if self.default is not _UNSET:
            return self.default
        if spec.default is not MISSING:
            return spec.default
        if callable(spec.default_factory):
            return spec.default_factory()
        return None


def setting(
    kind: Kind,
    doc: str,
    *,
    name: str | None = None,
    required: str | None = None,
    when: str | None = None,
    default: Any = _UNSET,
    derive: Callable[[Reading], Any] | None = None,
    default_doc: str | None = None,
) -> dict[str, Any]:
    """Field metadata declaring a key: ``field(default=1000, metadata=setting(...))``."""
    return {"setting": Setting(kind, doc, name, required, when, default, derive,
                               default_doc)}


def declared(cls: type[Any]) -> Iterator[tuple[Field[Any], Setting, str]]:
    """The fields of the config dataclass ``cls`` that are keys: field, setting, key."""
    for spec in fields(cls):
        found = spec.metadata.get("setting")
        if isinstance(found, Setting):
            yield spec, found, found.name or spec.name


class Typed(Protocol):
    """A declared system, as the kinds see it (`SystemConfig`)."""

    @property
    def type(self) -> str: ...


@dataclass
class Reading:
    """One table being read: its `Section`, what its kinds may need (the job file's
    folder, the systems and streams declared so far) and the values read so far."""

    section: Section
    root: Path = Path()
    systems: Mapping[str, Typed] = dataclass_field(default_factory=dict)
    streams: Mapping[str, object] = dataclass_field(default_factory=dict)
    values: dict[str, Any] = dataclass_field(default_factory=dict)
    """Field name → value, for the keys read so far."""

    def nested(self, key: str, table: Mapping[str, Any]) -> Reading:
        """A reading of the sub-table ``key`` of this one."""
        return Reading(Section(table, (*self.section.path, key), self.section.problems),
                       self.root, self.systems, self.streams)


def read_table(cls: type[Any], reading: Reading) -> dict[str, Any]:
    """The values of ``cls``'s declared keys in ``reading``'s table, by field name, in
    field order; a key declared `when` another ``type`` is not read (so it is unknown).
    Problems are recorded; the caller checks what spans keys, then calls
    ``section.finish()``."""
    section = reading.section
    for spec, declaration, key in declared(cls):
        if declaration.when not in (None, reading.values.get("type")):
            continue
        if declaration.required is not None and not section.present(key):
            section.missing(key, declaration.required)
        default = (declaration.derive(reading) if declaration.derive is not None
                   else declaration.default_of(spec))
        reading.values[spec.name] = declaration.kind.read(reading, key, default)
    return reading.values
