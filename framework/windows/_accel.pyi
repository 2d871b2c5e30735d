"""Types of the C extension `framework.windows._accel` (see `framework.windows.accel`)."""

from collections.abc import Callable
from typing import Any

MAX_TIME: int

Close = Callable[[list[Any], int, int], tuple[list[tuple[int, int, Any]], list[Any], int]]

def fold(layout: int, param: int, spec: tuple[Any, ...],
         general: Callable[[list[Any] | None, Any, int], tuple[list[Any], int]] | None,
         state: list[Any] | None, value: Any, ts: int) -> tuple[list[Any], int]: ...
def close_all(layout: int, param: int, size: int, spec: tuple[Any, ...],
              names: tuple[str, ...], key_from_text: Callable[[str], Any],
              close: Close | None, taken: list[tuple[int, str]],
              load: Callable[[str], list[Any] | None], closed: int, bound: int,
              result: type[tuple[Any, ...]]
              ) -> tuple[list[Any], list[tuple[str, list[Any], int]], list[str]]: ...
class Stepper:
    taken: int
    def __call__(self, envelope: Any, collector: Any) -> list[Any]: ...
    def step(self, envelope: Any) -> Any: ...

def stepper(windows: Any, event_time: Any, keyed: Any, grace: int, layout: int, param: int,
            size: int, spec: tuple[Any, ...], general: Any, close_due: Callable[[Any], Any],
            slow: Callable[[Any, Any], Any], method: Callable[..., Any]) -> Stepper: ...
def due_take(at: dict[str, int], buckets: dict[int, list[str]], times: list[int],
             bound: int) -> list[tuple[int, str]]: ...
def note_kept(at: dict[str, int], buckets: dict[int, list[str]], times: list[int],
              granule: int, kept: list[tuple[str, list[Any], int]],
              cache: dict[str, list[Any]] | None) -> list[tuple[str, list[Any], int]]: ...
