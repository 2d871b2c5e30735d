"""sampan's runtime: task API, systems, stores, checkpoints, coordinator, workers, CLI."""

from framework.api import (
    Envelope,
    MessageCollector,
    StreamTask,
    TaskContext,
    TaskCoordinator,
    WindowTimes,
)

__all__ = ["Envelope", "MessageCollector", "StreamTask", "TaskContext", "TaskCoordinator",
           "WindowTimes"]
