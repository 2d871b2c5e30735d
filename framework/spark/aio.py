"""Drive the async system API from Spark's synchronous driver callbacks."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Awaitable, Callable
from typing import TypeVar

from framework.config import JobConfig
from framework.systems import open_system
from framework.systems.base import System

__all__ = ["run_sync", "with_system"]

T = TypeVar("T")


def run_sync(make: Callable[[], Awaitable[T]]) -> T:
    """Run the coroutine ``make()`` to completion, on a helper thread if a loop is running
    here already (e.g. called from an async drill)."""

    async def main() -> T:
        return await make()

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(main())
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, main()).result()


def with_system(config: JobConfig, system: str, use: Callable[[System], Awaitable[T]]) -> T:
    """Open ``[systems.<system>]`` of ``config``, run ``use(system)``, close it."""

    async def main() -> T:
        opened = open_system(config.system(system))
        try:
            await opened.start()
            return await use(opened)
        finally:
            await opened.close()

    return run_sync(main)
