"""Exceptions of the sampan runtime: one root, one-line subclasses, messages that name the fix."""

from __future__ import annotations

__all__ = [
    "EXIT_FENCED",
    "EXIT_PERMANENT",
    "EXIT_STUCK",
    "AuthenticationError",
    "AuthorizationError",
    "ConfigError",
    "FencedError",
    "JobModelError",
    "PermanentError",
    "ProcessingError",
    "SampanError",
    "SerdeError",
    "StoreCorruptedError",
    "StoreError",
    "StoreLockedError",
    "StreamNotFoundError",
    "SystemUnavailableError",
    "TaskLoadError",
    "UnsupportedOperation",
]


EXIT_FENCED = 3
"""Exit status of a worker stopped because a newer job model fenced it out."""
EXIT_STUCK = 4
"""Exit status of a worker whose task watchdog found a task stuck (``job.task_timeout_ms``)."""
EXIT_PERMANENT = 5
"""Exit status of a worker stopped by a `PermanentError`: restarting it would fail again."""


class SampanError(Exception):
    """Root of every error the sampan runtime raises on purpose."""


class PermanentError(SampanError):
    """An error a restart cannot fix (the job file, code that does not load, credentials,
    missing ACLs): a job stops at once on it instead of restarting its workers."""


class ConfigError(PermanentError, ValueError):
    """The job file is invalid; the message names the key, the file and line, and the fix."""


class TaskLoadError(PermanentError):
    """The task class named by ``job.task`` cannot be imported or is not a StreamTask."""


class SerdeError(SampanError, ValueError):
    """A key or value could not be (de)serialized; names the SSP, offset and serde."""


class StreamNotFoundError(SampanError, LookupError):
    """A stream does not exist in its system; names the stream and how to create it."""


class UnsupportedOperation(SampanError):
    """The system or broker lacks a feature (e.g. CreatePartitions); names the feature."""


class SystemUnavailableError(SampanError):
    """A system could not be reached in time (broker down, database locked too long)."""


class DamagedLogError(SystemUnavailableError):
    """A local log's file is damaged: no process can read it until it is restored or moved."""


class AuthenticationError(PermanentError):
    """A Kafka cluster refused who sampan said it is (wrong password, untrusted or expired
    certificate, TLS expected); names the system, the brokers and what to check."""


class AuthorizationError(PermanentError):
    """A Kafka cluster's ACLs refused one operation on one resource; names both."""

    def __init__(self, message: str, *, operation: str = "", resource: str = "") -> None:
        super().__init__(message)
        self.operation = operation
        self.resource = resource


class FencedError(SampanError):
    """A worker of an older job-model epoch tried to commit after a newer epoch began."""


class StoreError(SampanError):
    """A state store could not be opened, restored or written."""


class StoreLockedError(StoreError):
    """Another process has the store open (its RocksDB LOCK is taken)."""


class StoreCorruptedError(StoreError):
    """A store's files are damaged (checksum mismatch, truncated file); names the folder."""

    def __init__(self, message: str, *, path: str = "", store: str = "", task: str = ""):
        super().__init__(message)
        self.path = path
        self.store = store
        self.task = task


class ProcessingError(SampanError):
    """A task failed on a message under ``errors.policy = "fail"``; names SSP and offset."""


class JobModelError(SampanError):
    """No usable job model: none published yet, or it does not match the job file."""
