"""Errors of the Spark pipelines: each names the stream, option or job and the fix."""

from __future__ import annotations

from framework.errors import SampanError

__all__ = ["RekeyError", "SparkOptionError", "SparkUnavailableError", "VerificationError"]


class SparkUnavailableError(SampanError):
    """PySpark is not installed or Java is missing; says how to install what is missing."""


class SparkOptionError(SampanError, ValueError):
    """A ``sampan`` DataSource option is missing or invalid; names the option and the fix."""


class RekeyError(SampanError):
    """A re-key was refused (job running, task count not dividing a partition count, …)."""


class VerificationError(SampanError):
    """A job cannot be verified (no verifier for its task, streams missing)."""
