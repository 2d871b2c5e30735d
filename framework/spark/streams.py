"""Which stream a DataSource option names, with its serdes: declared streams, changelogs,
the coordinator stream, or any other stream of a declared system (as bytes)."""

from __future__ import annotations

from framework.config import JobConfig, StreamConfig, StreamRef

__all__ = ["resolve_stream"]


def resolve_stream(config: JobConfig, qualified: str) -> StreamConfig:
    """The `StreamConfig` of ``qualified`` (``"<system>.<stream>"``).

    A logged store's changelog uses the store's serdes; the coordinator stream has string
    keys and JSON values; a stream the job file does not declare is read as bytes.
    """
    if qualified in config.streams:
        return config.stream(qualified)
    system, stream = StreamRef.parse(qualified)
    for store in config.logged_stores:
        if config.changelog_stream(store) == qualified:
            spec = config.store(store)
            return StreamConfig(system, stream, spec.key_serde, spec.value_serde, compacted=True)
    if qualified == config.coordinator_stream:
        return StreamConfig(system, stream, "string", "json", compacted=True)
    config.system(system)  # ConfigError naming the declared systems
    return StreamConfig(system, stream, "bytes", "bytes")
