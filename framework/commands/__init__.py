"""Subcommands of the `sampan` CLI, one module each."""
