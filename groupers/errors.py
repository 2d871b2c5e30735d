"""Exceptions raised by the pure grouping and assignment algorithms."""

from __future__ import annotations

__all__ = ["AssignmentError", "ExpansionError", "GrouperError"]


class GrouperError(Exception):
    """Root of every error raised by `groupers`."""


class ExpansionError(GrouperError, ValueError):
    """A stream's partition count changed in a way that cannot keep keys on their tasks."""


class AssignmentError(GrouperError, ValueError):
    """An assignor was given inconsistent input (unknown topic, bad capacity, ...)."""
