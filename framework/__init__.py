"""sampan's runtime: task API, systems, stores, checkpoints, coordinator, workers, CLI."""

from framework.api import (
    Envelope,
    KeyValueStore,
    MessageCollector,
    StreamTask,
    TaskContext,
    TaskCoordinator,
    WindowTimes,
)

__all__ = ["Envelope", "KeyValueStore", "MessageCollector", "StreamTask", "TaskContext",
           "TaskCoordinator", "WindowTimes"]
