"""Systems: the local embedded log and Kafka behind one `System` protocol.

`open_system` turns a ``[systems.<name>]`` config into a `System`; call its ``start``
(or just use it: both systems connect on first use) and ``close`` when done.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from framework.errors import ConfigError
from framework.systems.base import System

__all__ = ["SYSTEM_TYPES", "SystemSettings", "open_system"]

SYSTEM_TYPES = ("local", "kafka")


class SystemSettings(Protocol):
    """What `open_system` reads from a system's config (``framework.config.SystemConfig``)."""

    @property
    def name(self) -> str: ...
    @property
    def type(self) -> str: ...
    @property
    def path(self) -> Path | None: ...
    @property
    def bootstrap(self) -> str | None: ...
    @property
    def client_options(self) -> Mapping[str, Any]: ...


def open_system(config: SystemSettings) -> System:
    """A `System` for ``config``; imports the Kafka client only for kafka systems."""
    options = dict(getattr(config, "client_options", None) or {})
    if config.type == "local":
        if config.path is None:
            raise ConfigError(
                f"[systems.{config.name}] is a local system without `path`; set path to the "
                "directory that holds (or will hold) its log.sqlite3"
            )
        from framework.systems.local.system import LocalSystem

        return LocalSystem(config.name, Path(config.path), options)
    if config.type == "kafka":
        if not config.bootstrap:
            raise ConfigError(
                f"[systems.{config.name}] is a kafka system without `bootstrap`; set it to "
                "the brokers' host:port list, e.g. bootstrap = \"127.0.0.1:9092\""
            )
        from framework.systems.kafka.system import KafkaSystem

        return KafkaSystem(config.name, config.bootstrap, options,
                           root=getattr(config, "root", None))
    raise ConfigError(
        f"[systems.{config.name}] type = {config.type!r}: use one of {list(SYSTEM_TYPES)}"
    )
