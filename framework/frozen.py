"""Cheap construction of frozen slots dataclasses on the worker's hot path.

A frozen dataclass's ``__init__`` sets each field through ``object.__setattr__`` (to get
past its own frozen ``__setattr__``), which makes it 3–4× dearer to build than a plain
slots object. `fast_constructor` builds the same frozen object the plain way: a sibling
class with the same ``__slots__`` assigns the fields, then the instance becomes the
frozen class (same layout), so what the caller gets is an ordinary, immutable instance.

>>> from dataclasses import dataclass
>>> @dataclass(frozen=True, slots=True)
... class Point:
...     x: int
...     y: int
>>> point = fast_constructor(Point)(1, 2)
>>> point, type(point) is Point, point == Point(1, 2)
(Point(x=1, y=2), True, True)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["fast_constructor"]

T = TypeVar("T")


def fast_constructor(cls: type[T]) -> Callable[..., T]:
    """A positional constructor of the frozen slots dataclass ``cls`` taking every field
    in order (no defaults, no ``__post_init__``): the hot path's way to build one."""
    names = [field.name for field in dataclasses.fields(cls)]  # type: ignore[arg-type]
    slots = getattr(cls, "__slots__", None)
    if not dataclasses.is_dataclass(cls) or slots is None or tuple(slots) != tuple(names):
        raise TypeError(f"{cls.__name__} must be a slots dataclass whose slots are its fields")
    source = (f"def __init__(self, {', '.join(names)}):\n"
              + "".join(f"    self.{name} = {name}\n" for name in names)
              + "    self.__class__ = target\n")
    namespace: dict[str, Any] = {}
    exec(source, {"target": cls}, namespace)  # generated from the field names only
    builder = type(f"_Fast{cls.__name__}", (), {"__slots__": tuple(names),
                                               "__init__": namespace["__init__"]})
    return builder
