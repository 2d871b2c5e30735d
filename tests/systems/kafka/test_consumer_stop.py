"""Closing aiokafka consumers: aiokafka 0.14's fetcher leaks the cancellation of a fetch it
cancels on close (a fetch retrying after a timed-out request, as on a loaded machine);
`stop_consumer` finishes the close instead of ending the caller with a CancelledError."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer

from framework.systems.kafka.admin import stop_consumer


async def _retrying_fetch(wind_down_s: float) -> None:
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        await asyncio.sleep(wind_down_s)
        raise


async def _consumer_with_a_fetch_in_flight(bootstrap: str, wind_down_s: float = 0.0
                                           ) -> AIOKafkaConsumer:
    """A consumer whose fetcher has a retrying fetch in flight when it is closed."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    fetcher = consumer._fetcher
    close = fetcher.close

    async def close_with_a_fetch_in_flight() -> None:
        fetcher._pending_tasks.add(asyncio.ensure_future(_retrying_fetch(wind_down_s)))
        await asyncio.sleep(0)  # the fetch is running (sleeping) when the close begins
        await close()

    fetcher.close = close_with_a_fetch_in_flight
    return consumer


async def test_aiokafka_stop_leaks_a_cancelled_fetch(kafka_broker: Any) -> None:
    """What `stop_consumer` works around; if this fails, aiokafka fixed it."""
    consumer = await _consumer_with_a_fetch_in_flight(kafka_broker.bootstrap)
    try:
        with pytest.raises(asyncio.CancelledError):
            await consumer.stop()
    finally:
        await consumer._client.close()


async def test_stop_consumer_absorbs_it_and_closes_the_connections(kafka_broker: Any) -> None:
    consumer = await _consumer_with_a_fetch_in_flight(kafka_broker.bootstrap)
    await stop_consumer(consumer)
    assert all(not conn.connected() for conn in consumer._client._conns.values())


async def test_stop_consumer_lets_a_cancellation_of_the_caller_through(kafka_broker: Any
                                                                       ) -> None:
    consumer = await _consumer_with_a_fetch_in_flight(kafka_broker.bootstrap, wind_down_s=5)
    stopping = asyncio.ensure_future(stop_consumer(consumer))
    while not consumer._closed:  # inside stop(), waiting for the fetch to wind down
        await asyncio.sleep(0.01)
    stopping.cancel()
    with pytest.raises(asyncio.CancelledError):
        await stopping
    await consumer._client.close()
