"""Fence a transactional producer by its id and epoch (KIP-360's epoch bump).

Kafka fences a zombie when a new producer initialises the same ``transactional.id``: a
restarted worker needs nothing more. A newer job model must also fence the workers of
the older one, whose ``transactional.id`` nobody initialises again: every exactly-once
worker records its producer id and epoch in the job's fences topic, and `fence_producer`
sends InitProducerId v3 with that *current* id and epoch. The broker then aborts the
transaction the producer left open (it answers only once the abort is written) and bumps
the epoch, so the old producer's next produce, AddPartitionsToTxn or EndTxn fails.

A bump is idempotent on Kafka: sent again with the same identity it answers the current
one without bumping further (so a producer that re-initialised since is not fenced by a
stale record — it holds a newer epoch than the one recorded, and its next commit checks
the job's epoch anyway).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from aiokafka.client import AIOKafkaClient, ConnectionGroup, CoordinationType
from aiokafka.errors import for_code
from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.types import CompactString, Int16, Int32, Int64, Schema, TaggedFields

__all__ = ["ProducerIdentity", "fence_producer"]

log = logging.getLogger(__name__)

_RETRIABLE = {14, 15, 16, 51}  # coordinator loading / unavailable / moved, concurrent txns
_STALE = {47, 90}  # INVALID_PRODUCER_EPOCH, PRODUCER_FENCED: someone bumped it already
_ATTEMPTS = 50


class _InitProducerIdResponse_v3(Response):  # type: ignore[misc]
    API_KEY = 22
    API_VERSION = 3
    SCHEMA = Schema(("throttle_time_ms", Int32), ("error_code", Int16),
                    ("producer_id", Int64), ("producer_epoch", Int16), ("tags", TaggedFields))


class _InitProducerIdRequest_v3(RequestStruct):  # type: ignore[misc]
    API_KEY = 22
    API_VERSION = 3
    FLEXIBLE_VERSION = True
    RESPONSE_TYPE = _InitProducerIdResponse_v3
    SCHEMA = Schema(("transactional_id", CompactString("utf-8")),
                    ("transaction_timeout_ms", Int32), ("producer_id", Int64),
                    ("producer_epoch", Int16), ("tags", TaggedFields))


class _BumpEpoch(Request[_InitProducerIdRequest_v3]):  # type: ignore[misc]
    """InitProducerId with the current producer id and epoch (KIP-360): bump the epoch."""

    API_KEY = 22

    def __init__(self, transactional_id: str, producer_id: int, epoch: int) -> None:
        self._args: tuple[Any, ...] = (transactional_id, 60_000, producer_id, epoch, {})

    def build(self, request_struct_class: type[_InitProducerIdRequest_v3]
              ) -> _InitProducerIdRequest_v3:
        return request_struct_class(*self._args)


ProducerIdentity = tuple[int, int]
"""(producer id, producer epoch)."""


async def _send(client: AIOKafkaClient, transactional_id: str, request: Any) -> Any:
    """Send to the transaction coordinator, retrying while it is busy or moving."""
    for _ in range(_ATTEMPTS):
        node = await client.coordinator_lookup(CoordinationType.TRANSACTION, transactional_id)
        response = await client.send(node, request, group=ConnectionGroup.COORDINATION)
        if response.error_code not in _RETRIABLE:
            return response
        await asyncio.sleep(0.1)
    return response


async def fence_producer(client: AIOKafkaClient, transactional_id: str,
                         producer: ProducerIdentity) -> ProducerIdentity | None:
    """Bump ``producer``'s epoch (the broker aborts its open transaction first); returns
    the identity the broker now holds, or None when ``producer`` is older than the
    last epoch (someone bumped it since)."""
    producer_id, epoch = producer
    bumped = await _send(client, transactional_id,
                         _BumpEpoch(transactional_id, producer_id, epoch))
    if bumped.error_code in _STALE:
        return None
    if bumped.error_code:
        raise for_code(bumped.error_code)(
            f"InitProducerId (epoch bump) of {transactional_id!r}")
    identity = (bumped.producer_id, bumped.producer_epoch)
    log.info("fenced producer %d epoch %d of %s (now epoch %d); its open transaction, if "
             "any, is aborted", producer_id, epoch, transactional_id, identity[1])
    return identity
