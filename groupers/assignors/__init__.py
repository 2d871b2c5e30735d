"""Partition and task assignors: each module implements one source document."""
