"""Types of the C extension `framework._json_flat` (see `framework.serdes`)."""

from typing import Any

def flat(obj: dict[Any, Any] | list[Any], depth: int) -> bool: ...
