"""The `sampan` command."""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `sampan` console script."""
    return 0
