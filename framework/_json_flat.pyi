"""Types of the C extension `framework._json_flat` (see `framework.serdes`)."""

from collections.abc import Callable
from typing import Any

def flat(obj: dict[Any, Any] | list[Any], depth: int) -> bool: ...
def dumps(obj: Any, write: Callable[[Any], bytes], depth: int, buffer: int) -> bytes | None: ...
