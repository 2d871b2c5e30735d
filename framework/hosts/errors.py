"""Errors of running a job on several hosts."""

from __future__ import annotations

from framework.errors import SampanError

__all__ = ["AiokafkaUnsupportedError", "DuplicateHostError", "HostError", "HostsUnsupportedError",
           "LeaderError", "StateFolderBusyError"]


class HostError(SampanError):
    """Root of the several-hosts errors."""


class HostsUnsupportedError(HostError):
    """``--host`` on a job whose metadata system cannot span machines (the local log)."""


class DuplicateHostError(HostError):
    """Another running host of the job already uses this ``--host`` name."""


class LeaderError(HostError):
    """The group leader could not build or publish the next job model."""


class StateFolderBusyError(HostError):
    """Another `sampan run` of the job on this machine holds the state folder's lock."""


class AiokafkaUnsupportedError(HostError):
    """The installed aiokafka lacks the group-coordinator hooks the hosts rely on."""
