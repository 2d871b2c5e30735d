"""Fence a transactional producer by its id and epoch, and abort its open transaction.

Kafka fences a zombie when a new producer initialises the same ``transactional.id``.
librdkafka's mock cluster does not (it hands out a new producer id), but both honour the
explicit epoch bump of KIP-360: InitProducerId v3 carrying the *current* producer id and
epoch. So every exactly-once worker records its producer id and epoch in the job's
fences topic, and whoever takes over (the worker's replacement, or `KafkaSystem.fence`
for a new job model) bumps that epoch — the old producer's next produce, AddPartitions
or EndTxn fails — and aborts the transaction it left open.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from aiokafka.client import AIOKafkaClient, ConnectionGroup, CoordinationType
from aiokafka.errors import for_code
from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.transaction import EndTxnRequest
from aiokafka.protocol.types import CompactString, Int16, Int32, Int64, Schema, TaggedFields

__all__ = ["ProducerIdentity", "fence_producer"]

log = logging.getLogger(__name__)

_RETRIABLE = {14, 15, 16, 51}  # coordinator loading / unavailable / moved, concurrent txns
_STALE = {47, 90}  # INVALID_PRODUCER_EPOCH, PRODUCER_FENCED: someone bumped it already
_NO_TXN = 48  # INVALID_TXN_STATE: nothing open to abort (Kafka aborted it on the bump)
_ATTEMPTS = 50


class _InitProducerIdResponse_v3(Response):
    API_KEY = 22
    API_VERSION = 3
    SCHEMA = Schema(("throttle_time_ms", Int32), ("error_code", Int16),
                    ("producer_id", Int64), ("producer_epoch", Int16), ("tags", TaggedFields))


class _InitProducerIdRequest_v3(RequestStruct):
    API_KEY = 22
    API_VERSION = 3
    FLEXIBLE_VERSION = True
    RESPONSE_TYPE = _InitProducerIdResponse_v3
    SCHEMA = Schema(("transactional_id", CompactString("utf-8")),
                    ("transaction_timeout_ms", Int32), ("producer_id", Int64),
                    ("producer_epoch", Int16), ("tags", TaggedFields))


class _BumpEpoch(Request[_InitProducerIdRequest_v3]):
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
    """Bump ``producer``'s epoch and abort its open transaction; returns the new
    identity, or None when its epoch had already been bumped by someone else."""
    producer_id, epoch = producer
    bumped = await _send(client, transactional_id,
                         _BumpEpoch(transactional_id, producer_id, epoch))
    if bumped.error_code in _STALE:
        return None
    if bumped.error_code:
        raise for_code(bumped.error_code)(
            f"InitProducerId (epoch bump) of {transactional_id!r}")
    identity = (bumped.producer_id, bumped.producer_epoch)
    ended = await _send(client, transactional_id,
                        EndTxnRequest(transactional_id, identity[0], identity[1], False))
    if ended.error_code not in (0, _NO_TXN, *_STALE):
        raise for_code(ended.error_code)(f"EndTxn (abort) of {transactional_id!r}")
    log.info("fenced producer %d epoch %d of %s (now epoch %d); its open transaction, if "
             "any, is aborted", producer_id, epoch, transactional_id, identity[1])
    return identity
