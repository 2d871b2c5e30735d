"""Membership of a Kafka consumer group through KIP-848's ConsumerGroupHeartbeat.

The classic group protocol (JoinGroup/SyncGroup, the one aiokafka speaks) holds the first
rebalance of an empty group for the broker's ``group.initial.rebalance.delay.ms`` (3 s by
default). The consumer group protocol of Kafka 4.0+ has no such delay: the broker assigns
in the answer to the first heartbeat. The coordinator lease needs only that answer, so
this module speaks the one request itself (v1: the member chooses its id) over an
aiokafka client's connection to the group coordinator.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from io import BytesIO
from typing import Any

from aiokafka.client import AIOKafkaClient, ConnectionGroup, CoordinationType
from aiokafka.errors import IncompatibleBrokerVersion, KafkaError, for_code
from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.types import (
    Boolean,
    CompactArray,
    CompactString,
    Int8,
    Int16,
    Int32,
    Schema,
    TaggedFields,
    UnsignedVarInt32,
)

__all__ = ["LEAVE_EPOCH", "RETRIABLE", "GroupMember", "Heartbeat", "consumer_group_members"]

LEAVE_EPOCH = -1
"""A heartbeat with this member epoch leaves the group."""

RETRIABLE = {14, 15, 16}
"""COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR: ask again."""

RETRIABLE_LOOKUP = 15
"""The error to report when no coordinator could be found."""

_ATTEMPTS = 50


class _Uuid:
    """Kafka's uuid: 16 raw bytes."""

    @classmethod
    def encode(cls, value: bytes) -> bytes:
        return bytes(value)

    @classmethod
    def decode(cls, data: BytesIO) -> bytes:
        return data.read(16)

    @classmethod
    def repr(cls, value: bytes) -> str:
        return value.hex()


_TOPIC_PARTITIONS = CompactArray(Schema(("topic_id", _Uuid), ("partitions", CompactArray(Int32)),
                                        ("tags", TaggedFields)))


class _NullableAssignment:
    """The answer's nullable ``Assignment`` struct: a -1 byte, or 1 and the struct."""

    _schema = Schema(("topic_partitions", _TOPIC_PARTITIONS), ("tags", TaggedFields))

    @classmethod
    def encode(cls, value: Any) -> bytes:
        marker: bytes = Int8.encode(-1 if value is None else 1)
        return marker if value is None else marker + bytes(cls._schema.encode(value))

    @classmethod
    def decode(cls, data: BytesIO) -> Any:
        return None if Int8.decode(data) < 0 else cls._schema.decode(data)

    @classmethod
    def repr(cls, value: Any) -> str:
        return repr(value)


class _HeartbeatResponse_v1(Response):  # type: ignore[misc]
    API_KEY = 68
    API_VERSION = 1
    SCHEMA = Schema(("throttle_time_ms", Int32), ("error_code", Int16),
                    ("error_message", CompactString("utf-8")),
                    ("member_id", CompactString("utf-8")), ("member_epoch", Int32),
                    ("heartbeat_interval_ms", Int32), ("assignment", _NullableAssignment),
                    ("tags", TaggedFields))


class _HeartbeatRequest_v1(RequestStruct):  # type: ignore[misc]
    API_KEY = 68
    API_VERSION = 1
    FLEXIBLE_VERSION = True
    RESPONSE_TYPE = _HeartbeatResponse_v1
    SCHEMA = Schema(("group_id", CompactString("utf-8")), ("member_id", CompactString("utf-8")),
                    ("member_epoch", Int32), ("instance_id", CompactString("utf-8")),
                    ("rack_id", CompactString("utf-8")), ("rebalance_timeout_ms", Int32),
                    ("subscribed_topic_names", CompactArray(CompactString("utf-8"))),
                    ("subscribed_topic_regex", CompactString("utf-8")),
                    ("server_assignor", CompactString("utf-8")),
                    ("topic_partitions", _TOPIC_PARTITIONS), ("tags", TaggedFields))


class _Heartbeat(Request[_HeartbeatRequest_v1]):  # type: ignore[misc]
    """A full ConsumerGroupHeartbeat (every field given, so any answer can be acted on)."""

    API_KEY = 68

    def __init__(self, *args: Any) -> None:
        self._args = args

    def build(self, request_struct_class: type[_HeartbeatRequest_v1]) -> _HeartbeatRequest_v1:
        return request_struct_class(*self._args)


@dataclass(frozen=True)
class Heartbeat:
    """What the group coordinator answered: an error code (0: none), the member's epoch,
    the interval it asks for, and the partitions it owns now (None: unchanged)."""

    error_code: int
    error_message: str | None
    member_epoch: int
    interval_ms: int
    owned: dict[bytes, list[int]] | None


class GroupMember:
    """One member of consumer group ``group`` subscribed to ``topic``; the broker's
    uniform assignor keeps a partition with the member that owns it."""

    def __init__(self, client: AIOKafkaClient, group: str, topic: str,
                 rebalance_timeout_ms: int, member_id: str | None = None) -> None:
        self.client = client
        self.group = group
        self.topic = topic
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.member_id = member_id or uuid.uuid4().hex
        self.epoch = 0
        self.owned: dict[bytes, list[int]] = {}

    async def heartbeat(self, epoch: int | None = None) -> Heartbeat:
        """Send one heartbeat (joining at epoch 0, leaving at `LEAVE_EPOCH`); raises
        `aiokafka.errors.IncompatibleBrokerVersion` on a broker without KIP-848's protocol."""
        epoch = self.epoch if epoch is None else epoch
        no_tags: dict[int, bytes] = {}
        owned = [(topic, sorted(parts), no_tags) for topic, parts in self.owned.items()]
        request = _Heartbeat(self.group, self.member_id, epoch, None, None,
                             self.rebalance_timeout_ms, [self.topic], None, None, owned,
                             no_tags)
        answer = await self._send(request)
        beat = Heartbeat(answer.error_code, answer.error_message, answer.member_epoch,
                         answer.heartbeat_interval_ms, _owned(answer.assignment))
        if beat.error_code == 0 and epoch != LEAVE_EPOCH:
            self.epoch = beat.member_epoch
            if beat.owned is not None:
                self.owned = beat.owned
        return beat

    async def _send(self, request: _Heartbeat) -> Any:
        """Send to the group coordinator, finding it again while it loads or moves."""
        code = 0
        for _ in range(_ATTEMPTS):
            answer = await _to_coordinator(self.client, self.group, request)
            code = RETRIABLE_LOOKUP if answer is None else answer.error_code
            if code not in RETRIABLE:
                return answer
            await asyncio.sleep(0.1)
        raise for_code(code)(f"ConsumerGroupHeartbeat of group {self.group!r}")


async def _to_coordinator(client: AIOKafkaClient, group: str, request: Any) -> Any:
    """``request``'s answer from ``group``'s coordinator; None while none can be found
    (a fresh broker creating its offsets topic answers FindCoordinator with error 15)."""
    try:
        node = await client.coordinator_lookup(CoordinationType.GROUP, group)
    except KafkaError as error:
        if getattr(error, "errno", None) in RETRIABLE:
            return None
        raise
    return await client.send(node, request, group=ConnectionGroup.COORDINATION)


def _owned(assignment: Any) -> dict[bytes, list[int]] | None:
    if assignment is None:
        return None
    return {topic_id: list(parts) for topic_id, parts, _tags in assignment[0] if parts}


class _DescribedPrefix:
    """The start of ConsumerGroupDescribe's first group, up to its member count: what
    follows (each member's fields) is never read."""

    _schema = Schema(("error_code", Int16), ("error_message", CompactString("utf-8")),
                     ("group_id", CompactString("utf-8")), ("state", CompactString("utf-8")),
                     ("group_epoch", Int32), ("assignment_epoch", Int32),
                     ("assignor", CompactString("utf-8")))

    @classmethod
    def decode(cls, data: BytesIO) -> Any:
        if UnsignedVarInt32.decode(data) - 1 < 1:
            return None
        return (*cls._schema.decode(data), UnsignedVarInt32.decode(data) - 1)

    @classmethod
    def encode(cls, value: Any) -> bytes:
        raise NotImplementedError("only read")

    @classmethod
    def repr(cls, value: Any) -> str:
        return repr(value)


class _DescribeResponse_v0(Response):  # type: ignore[misc]
    API_KEY = 69
    API_VERSION = 0
    SCHEMA = Schema(("throttle_time_ms", Int32), ("first", _DescribedPrefix))


class _DescribeRequest_v0(RequestStruct):  # type: ignore[misc]
    API_KEY = 69
    API_VERSION = 0
    FLEXIBLE_VERSION = True
    RESPONSE_TYPE = _DescribeResponse_v0
    SCHEMA = Schema(("group_ids", CompactArray(CompactString("utf-8"))),
                    ("include_authorized_operations", Boolean), ("tags", TaggedFields))


class _Describe(Request[_DescribeRequest_v0]):  # type: ignore[misc]
    API_KEY = 69

    def __init__(self, group: str) -> None:
        self._group = group

    def build(self, request_struct_class: type[_DescribeRequest_v0]) -> _DescribeRequest_v0:
        return request_struct_class([self._group], False, {})


async def consumer_group_members(client: AIOKafkaClient, group: str) -> int | None:
    """How many members ``group`` has as a KIP-848 consumer group (0 when empty); None
    when it is no such group (a classic one, or unknown) or the broker lacks the protocol.

    The classic DescribeGroups says ``Dead`` for a consumer group, members or not."""
    for _ in range(_ATTEMPTS):
        try:
            answer = await _to_coordinator(client, group, _Describe(group))
        except IncompatibleBrokerVersion:
            return None
        if answer is None:
            await asyncio.sleep(0.1)
            continue
        first = answer.first
        if first is None:
            return None
        error_code, state, members = first[0], first[3], first[-1]
        if error_code in RETRIABLE:
            await asyncio.sleep(0.1)
            continue
        if error_code:
            return None
        return 0 if state in ("Empty", "Dead") else int(members)
    return None
