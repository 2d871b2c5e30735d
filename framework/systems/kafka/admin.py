"""Kafka administration with bounded waits: topics, partition counts, offsets.

Every call to the broker goes through `KafkaAdmin.bounded`, so an unreachable or
silent broker becomes a `SystemUnavailableError` naming the bootstrap address instead
of a hang, and a missing broker feature becomes `UnsupportedOperation` at once.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, TypeVar

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import (
    IncompatibleBrokerVersion,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    NodeNotReadyError,
    RequestTimedOutError,
    TopicAlreadyExistsError,
    UnsupportedVersionError,
    for_code,
)
from aiokafka.protocol.metadata import MetadataRequest

from framework.errors import (
    AuthorizationError,
    SampanError,
    StreamNotFoundError,
    SystemUnavailableError,
    UnsupportedOperation,
)
from framework.systems.base import OffsetRange
from framework.systems.kafka.aiokafka_private import close_client, fetch_error, know_leaders
from framework.systems.kafka.denials import DENIALS, denial, denial_code, denied
from framework.systems.kafka.diagnosis import diagnose
from framework.systems.kafka.membership import consumer_group_members
from framework.systems.kafka.options import KafkaOptions
from framework.systems.kafka.txn_filter import CommittedFilter, TxnChunk, keep_control_batches

__all__ = ["UNREACHABLE", "KafkaAdmin", "close_quietly", "stop_consumer"]

T = TypeVar("T")

UNREACHABLE = (
    asyncio.TimeoutError,
    KafkaConnectionError,
    KafkaTimeoutError,
    NodeNotReadyError,
    RequestTimedOutError,
)
"""aiokafka's ways of saying the broker did not answer."""

_POLL_S = 0.05
_RECHECK_S = 0.2
_log = logging.getLogger(__name__)


async def stop_consumer(consumer: AIOKafkaConsumer) -> None:
    """``consumer.stop()``, finished when aiokafka leaks a cancellation of its own.

    aiokafka 0.14's ``Fetcher.close`` cancels the fetches in flight and awaits them without
    catching their CancelledError: a fetch retrying after a timed-out request then ends
    ``stop()`` with a CancelledError nobody asked for, before the client is closed. That
    one is absorbed and the client closed; a cancellation of the caller still propagates.
    """
    try:
        await consumer.stop()
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise
        await close_client(consumer)


async def close_quietly(closing: Awaitable[Any], timeout_s: float) -> None:
    """Await an aiokafka client's ``stop``/``close`` for at most ``timeout_s``, whatever it
    raises: with a broker down, aiokafka's fetcher lets the CancelledError of its own
    fetch task out of ``stop``, which would otherwise end the process. A cancellation of
    the caller itself still propagates."""
    try:
        await asyncio.wait_for(closing, timeout_s)
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise
    except Exception:  # the client is being dropped: nothing it says changes that
        pass


class _ClusterAdmin(AIOKafkaAdminClient):  # type: ignore[misc]
    """aiokafka's admin client, but a request for any node (metadata, topic configs) goes
    to every known broker in turn until one answers: aiokafka picks one at random from
    its cached metadata, which still lists a broker that died (for up to its metadata age),
    so a third of the calls on a 3-node cluster with one node down failed at once."""

    answered_by: int | None = None
    """The broker that answered the last request sent to any node (for log lines)."""

    def connected_client(self) -> Any:
        """The `aiokafka.client.AIOKafkaClient` this admin sends on."""
        return self._client

    async def ask(self, request: Any) -> Any:
        """Send ``request`` to any live broker (see the class docstring); its answer."""
        return await self._send_request(request)

    async def _send_request(self, request: Any, node_id: int | None = None) -> Any:
        if node_id is not None:
            return await super()._send_request(request, node_id)
        client = self._client
        nodes = [broker.nodeId for broker in client.cluster.brokers()]
        random.shuffle(nodes)
        failed: BaseException | None = None
        for node in nodes:
            try:
                answer = await client.send(node, request)
                self.answered_by = node
                return answer
            except (KafkaConnectionError, NodeNotReadyError, RequestTimedOutError) as exc:
                failed = exc
        if failed is None:
            return await super()._send_request(request)  # no broker known yet: aiokafka's way
        client.force_metadata_update()  # the live brokers, for the next call
        raise failed


class KafkaAdmin:
    """Topics and metadata of one Kafka cluster (one `KafkaSystem`)."""

    def __init__(self, system: str, bootstrap: str, options: KafkaOptions) -> None:
        self.system = system
        self.bootstrap = bootstrap
        self.options = options
        self._admin: _ClusterAdmin | None = None
        self._offsets: AIOKafkaConsumer | None = None
        self._counts: dict[str, int] = {}
        self._counts_at = float("-inf")
        self._seen: set[str] = set()  # streams some metadata answer has listed
        self._offsets_lock = asyncio.Lock()

    async def start(self) -> None:
        if self._admin is not None:
            return
        kwargs = self.options.client_kwargs(self.bootstrap)
        admin = _ClusterAdmin(**kwargs)
        # Answers at once when a partition is empty (see `_high_watermarks`).
        offsets = AIOKafkaConsumer(enable_auto_commit=False, fetch_max_wait_ms=10,
                                   isolation_level="read_committed", **kwargs)
        try:
            await self.connect(admin.start())
            await self.connect(offsets.start())
        except BaseException:
            await admin.close()
            await stop_consumer(offsets)
            raise
        keep_control_batches(offsets)
        self._admin, self._offsets = admin, offsets

    async def close(self) -> None:
        admin, offsets = self._admin, self._offsets
        self._admin, self._offsets = None, None
        if admin is not None:
            await close_quietly(admin.close(), self.options.timeout_s)
        if offsets is not None:
            await close_quietly(stop_consumer(offsets), self.options.timeout_s)

    async def client(self) -> Any:
        """The admin's connected `aiokafka.client.AIOKafkaClient` (the coordinator lease
        sends its group heartbeats on it: no connection of its own to set up)."""
        await self.start()
        assert self._admin is not None
        return self._admin.connected_client()

    def denial(self, error: BaseException, operation: str, resource: str, doing: str
               ) -> AuthorizationError:
        """``error`` (an aiokafka denial) as the missing ACL (`denials.denied`)."""
        found = denied(error, operation, resource, system=self.system,
                       bootstrap=self.bootstrap, options=self.options, doing=doing)
        assert found is not None, error
        return found

    def refused(self, code: int, operation: str, resource: str, doing: str
                ) -> AuthorizationError | None:
        """A response's error ``code`` as the missing ACL, or None when it is no denial."""
        kind = denial_code(code)
        if kind is None:
            return None
        return denial(kind, operation, resource, system=self.system, bootstrap=self.bootstrap,
                      options=self.options, doing=doing)

    def unavailable(self, what: str, exc: BaseException, bound_s: float | None = None
                    ) -> SystemUnavailableError:
        bound = self.options.timeout_s if bound_s is None else bound_s
        return SystemUnavailableError(
            f"Kafka at {self.bootstrap} (system {self.system!r}): {what} got no answer within "
            f"{bound:g} s ({type(exc).__name__}: {exc}); check that the "
            f"broker runs and that [systems.{self.system}] bootstrap points at it"
        )

    def transient(self, what: str, exc: BaseException) -> SystemUnavailableError:
        """A retriable broker error (a leader gone, a coordinator moving) that outlasted
        aiokafka's retries: the system is unavailable for now, as when it is silent."""
        return SystemUnavailableError(
            f"Kafka at {self.bootstrap} (system {self.system!r}): {what} failed "
            f"({type(exc).__name__}: {exc}); a broker is down or leadership is moving — check "
            f"that the brokers run and that [systems.{self.system}] bootstrap points at them"
        )

    async def connect(self, start: Awaitable[T], what: str = "connect",
                      timeout_s: float | None = None) -> T:
        """Await a client's ``start()`` (bounded); when it fails, say why as what happened
        — refused, no answer, TLS or credentials refused (`diagnose`) — not as aiokafka's
        "Unable to bootstrap"."""
        try:
            return await self.bounded(what, start, timeout_s)
        except (SystemUnavailableError, KafkaError, OSError) as error:
            problem = await diagnose(self.system, self.bootstrap, self.options)
            if problem is None:
                raise
            raise problem from error

    async def bounded(self, what: str, call: Awaitable[T], timeout_s: float | None = None
                      ) -> T:
        """Await ``call`` for at most ``timeout_s`` (default: the system's); silence →
        SystemUnavailableError."""
        bound = self.options.timeout_s if timeout_s is None else timeout_s
        try:
            return await asyncio.wait_for(call, bound)
        except UNREACHABLE as exc:
            raise self.unavailable(what, exc, bound) from exc

    def topic(self, stream: str) -> str:
        """The Kafka topic holding ``stream`` (its name inside the namespace)."""
        return self.options.namespace + stream

    def missing(self, stream: str) -> StreamNotFoundError:
        return StreamNotFoundError(
            f"stream {stream!r} does not exist in system {self.system!r} (Kafka at "
            f"{self.bootstrap}); create it with `sampan streams create {self.system}.{stream} "
            "--partitions N`"
        )

    # -- metadata ---------------------------------------------------------------------

    async def topic_counts(self, max_age_s: float = 0.0) -> dict[str, int]:
        """Every topic's partition count, from metadata at most ``max_age_s`` old.

        Asks for all topics: naming one in a metadata request lets brokers with
        auto-creation (tansu) create it. Keyed by stream: only the namespace's topics,
        without the namespace.
        """
        if time.monotonic() - self._counts_at > max_age_s:
            counts = await self._read_counts()
            vanished = self._seen - counts.keys()
            deadline = time.monotonic() + self.options.timeout_s
            if vanished:
                # Seen before, absent now: one broker's answer is not enough to call a
                # stream gone (a worker would stop on it). Ask again, other brokers too.
                _log.warning("Kafka at %s: broker %s answered metadata without stream(s) "
                             "%s seen before; asking again for up to %g s", self.bootstrap,
                             self._admin.answered_by if self._admin else None,
                             ", ".join(sorted(vanished)), self.options.timeout_s)
            while vanished and time.monotonic() < deadline:
                await asyncio.sleep(_RECHECK_S)
                counts = await self._read_counts()
                vanished = self._seen - counts.keys()
            self._seen = (self._seen - vanished) | counts.keys()
            self._counts, self._counts_at = counts, time.monotonic()
        return self._counts

    async def _read_counts(self) -> dict[str, int]:
        """One metadata answer: the partition count of every topic of the namespace."""
        await self.start()
        assert self._admin is not None
        topics = await self.bounded("metadata", self._admin.describe_topics())
        prefix = self.options.namespace
        return {
            t["topic"][len(prefix):]: len(t["partitions"])
            for t in topics
            if t["error_code"] == 0 and not t.get("is_internal", False)
            and t["topic"].startswith(prefix)
        }

    async def partition_counts(
        self, streams: Sequence[str], max_age_s: float = 0.0
    ) -> dict[str, int]:
        counts = await self.topic_counts(max_age_s)
        if max_age_s > 0 and any(s not in counts for s in streams):
            counts = await self.topic_counts()  # maybe created since the cached read
        for stream in streams:
            if stream not in counts:
                await self._raise_if_hidden(stream)
                raise self.missing(stream)
        return {stream: counts[stream] for stream in streams}

    async def _raise_if_hidden(self, stream: str) -> None:
        """A listing of every topic leaves out the topics the principal may not describe:
        ask for ``stream``'s topic by name (never creating it) and raise the denial if
        that is why it is missing."""
        assert self._admin is not None
        topic = self.topic(stream)
        answer = await self.bounded("metadata", self._admin.ask(
            MetadataRequest([topic], allow_auto_topic_creation=False)))
        for entry in answer.topics:
            if entry[1] == topic:
                refused = self.refused(entry[0], "DESCRIBE", topic,
                                       f"looking up stream {stream!r}")
                if refused is not None:
                    raise refused

    async def wait_for_count(self, stream: str, partitions: int) -> None:
        """Poll metadata until ``stream`` shows ``partitions`` partitions (bounded)."""
        deadline = time.monotonic() + self.options.timeout_s
        while (await self.topic_counts()).get(stream, 0) < partitions:
            if time.monotonic() > deadline:
                if stream not in await self.topic_counts():
                    await self._raise_if_hidden(stream)  # it exists, but not for us
                raise self.unavailable(
                    f"metadata of {stream!r} with {partitions} partitions", TimeoutError()
                )
            await asyncio.sleep(_POLL_S)

    async def offsets(self, stream: str, settle_s: float = 0.0) -> dict[int, OffsetRange]:
        """Per partition: oldest offset and the end a read_committed reader sees.

        A transaction's commit returns before the broker has written its markers, so for a
        moment its records lie past the last stable offset, as an open transaction's do.
        With ``settle_s`` the ends are read again (for at most that long) until no
        partition's stable offset is short of its high watermark: what a reader that
        checks finished work needs (a transaction still open then stays outside the end).
        """
        count = (await self.partition_counts([stream]))[stream]
        tps = [TopicPartition(self.topic(stream), p) for p in range(count)]
        deadline = time.monotonic() + settle_s
        while True:
            async with self._offsets_lock:
                assert self._offsets is not None
                await self.bounded("Metadata", know_leaders(self._offsets, tps))
                try:
                    oldest = await self.bounded("ListOffsets",
                                                self._offsets.beginning_offsets(tps))
                    listed = await self.bounded("ListOffsets", self._offsets.end_offsets(tps))
                except DENIALS as error:
                    raise self.denial(error, "DESCRIBE", self.topic(stream),
                                      f"reading the offsets of stream {stream!r}") from error
                end, unsettled = await self._high_watermarks(listed, oldest)
            if not unsettled or time.monotonic() >= deadline:
                return {tp.partition: OffsetRange(oldest[tp], end[tp]) for tp in tps}
            await asyncio.sleep(_POLL_S)

    async def offsets_for_time(self, stream: str, timestamp_ms: int) -> dict[int, int]:
        """Per partition, the offset of the first record stamped at or after
        ``timestamp_ms`` (ListOffsets by time); the end (`offsets`) when none is."""
        count = (await self.partition_counts([stream]))[stream]
        wanted = {TopicPartition(self.topic(stream), p): timestamp_ms for p in range(count)}
        async with self._offsets_lock:
            assert self._offsets is not None
            await self.bounded("Metadata", know_leaders(self._offsets, wanted))
            found = await self.bounded("ListOffsets", self._offsets.offsets_for_times(wanted))
        ends = await self.offsets(stream)
        return {tp.partition: ends[tp.partition].end if found.get(tp) is None
                else found[tp].offset for tp in wanted}

    def _stable(self, tp: TopicPartition, high: int) -> int:
        """The fetch's last stable offset when below ``high``: a read_committed fetch
        never goes past it (an open transaction), so neither may the end."""
        assert self._offsets is not None
        stable = self._offsets.last_stable_offset(tp)
        return high if stable is None or stable < 0 else min(high, stable)

    def _refused_reads(self, tps: Sequence[TopicPartition]) -> set[TopicPartition]:
        """The partitions among ``tps`` the broker would not let the offsets reader fetch
        (no READ on their topic: an output of the job, say)."""
        assert self._offsets is not None
        return {tp for tp in tps if isinstance(fetch_error(self._offsets, tp), DENIALS)}

    async def _committed_end(self, tp: TopicPartition, oldest: int, high: int) -> int:
        """One past the last committed record before ``high`` (`oldest` when none).

        With transactions a partition's tail may be control records or records of
        aborted or open transactions; readers stop at the last record they can see, so
        that is the end they are given. Reads backwards in doubling windows; without
        transactions the first window (the last batch, already fetched) answers.
        """
        consumer = self._offsets
        assert consumer is not None
        start, seek = max(high - 1, oldest), False
        deadline = time.monotonic() + self.options.timeout_s
        while True:
            if seek:
                consumer.seek(tp, start)
            last, committed = -1, CommittedFilter()
            released: list[TxnChunk] = []
            while await consumer.position(tp) < high:
                if self._refused_reads([tp]):
                    return high  # ListOffsets' answer (see `_high_watermarks`)
                if time.monotonic() > deadline:
                    raise self.unavailable(f"Fetch of {tp}", TimeoutError())
                fetched = (await consumer.getmany(tp, timeout_ms=50)).get(tp)
                if fetched:
                    released.extend(committed.release(fetched.chunks))
            for chunk in released:
                if chunk.columns:
                    last = max(last, max((offset for offset in chunk.columns.offsets
                                          if offset < high), default=-1))
            if last >= 0:
                return last + 1
            if start <= oldest:
                return oldest
            start, seek = max(oldest, high - 2 * (high - start)), True

    async def _high_watermarks(
        self, listed: Mapping[TopicPartition, int], oldest: Mapping[TopicPartition, int]
    ) -> tuple[dict[TopicPartition, int], set[TopicPartition]]:
        """End offsets as a fetch reports them (its high watermark), and the partitions
        whose last stable offset is short of it (a transaction open or being completed).

        tansu 0.6 answers ListOffsets(latest) with the base offset of the last batch
        plus one, short of the end whenever that batch holds several records; the
        high watermark of a fetch is right on every broker. Fetching from just before
        the listed end reads at most the last batch. The end returned is then the
        committed end (`_committed_end`) below that high watermark.
        """
        consumer = self._offsets
        assert consumer is not None
        tps = list(listed)
        consumer.assign(tps)
        try:
            for tp in tps:
                consumer.seek(tp, max(listed[tp] - 1, oldest[tp]))
            deadline = time.monotonic() + self.options.timeout_s
            unread: set[TopicPartition] = set()
            while any(consumer.highwater(tp) is None for tp in tps if tp not in unread):
                unread |= self._refused_reads(tps)
                if time.monotonic() > deadline:
                    raise self.unavailable(f"Fetch of {tps[0].topic!r}", TimeoutError())
                await asyncio.sleep(0.002)
            # A partition it may not read keeps ListOffsets' answer (read_committed: the
            # last stable offset), right on Apache Kafka.
            watermarks = {tp: listed[tp] if tp in unread else
                          max(listed[tp], consumer.highwater(tp)) for tp in tps}
            high = {tp: self._stable(tp, watermarks[tp]) for tp in tps}
            ends = {tp: await self._committed_end(tp, oldest[tp], high[tp])
                    if high[tp] > oldest[tp] and tp not in unread else high[tp] for tp in tps}
            return ends, {tp for tp in tps if high[tp] < watermarks[tp]}
        finally:
            consumer.assign([])

    async def cleanup_policy(self, stream: str) -> str:
        """The topic's ``cleanup.policy`` as the broker reports it."""
        configs = await self.stream_configs(stream, f"checking that stream {stream!r} is compacted")
        return configs.get("cleanup.policy", "delete")  # Kafka's default when unset

    async def stream_configs(self, stream: str, doing: str) -> dict[str, str]:
        """The topic configs of ``stream`` as the broker reports them (defaults included)."""
        await self.start()
        assert self._admin is not None
        # All configs: naming the wanted one makes tansu 0.6 drop the connection.
        resource = ConfigResource(ConfigResourceType.TOPIC, self.topic(stream))
        responses = await self.bounded("DescribeConfigs", self._admin.describe_configs([resource]))
        found: dict[str, str] = {}
        for response in responses:
            for resource_result in response.resources:
                refused = self.refused(resource_result[0], "DESCRIBE_CONFIGS", self.topic(stream),
                                       doing)
                if refused is not None:
                    raise refused
                found.update({str(entry[0]): str(entry[1]) for entry in resource_result[4]
                              if entry[1] is not None})
        return found

    async def group_members(self, group: str) -> int | None:
        """How many members consumer group ``group`` has now (0 when it is empty or
        unknown to the broker); None when the broker's answer cannot be read."""
        await self.start()
        assert self._admin is not None
        try:
            responses = await self.bounded(
                "DescribeGroups", self._admin.describe_consumer_groups([group]))
        except KafkaError:
            return None
        for response in responses:
            for entry in response.groups:
                error_code, group_id, state, members = entry[0], entry[1], entry[2], entry[5]
                if group_id != group:
                    continue
                if state == "Dead" or error_code == 69:  # how a KIP-848 group is described
                    found = await self.bounded("ConsumerGroupDescribe", consumer_group_members(
                        self._admin.connected_client(), group))
                    return found or 0
                if error_code not in (0, None):
                    continue
                return 0 if state in ("Empty", "Dead") else len(members)
        return None

    # -- topics -----------------------------------------------------------------------

    async def create_stream(
        self, stream: str, partitions: int, compacted: bool, exist_ok: bool
    ) -> None:
        if not stream or partitions < 1:
            raise SampanError(
                f"cannot create stream {stream!r} with {partitions} partitions: a stream needs "
                "a non-empty name and at least 1 partition"
            )
        if exist_ok and stream in await self.topic_counts():
            return  # no CreateTopics at all (for brokers that refuse sampan creating topics)
        await self.start()
        assert self._admin is not None
        configs = {**self.options.topic_configs,
                   **({"cleanup.policy": "compact"} if compacted else {})}
        topic = NewTopic(self.topic(stream), partitions, self.options.replication_factor,
                         topic_configs=configs)
        try:
            response = await self.bounded("CreateTopics", self._admin.create_topics([topic]))
        except (IncompatibleBrokerVersion, UnsupportedVersionError) as exc:
            raise UnsupportedOperation(
                f"CreateTopics: the broker at {self.bootstrap} cannot create topics, so "
                f"stream {stream!r} does not exist; create it with {partitions} "
                f"partition(s) with the broker's own tools") from exc
        existed = False
        for error in response.topic_errors:
            code, message = error[1], error[2] if len(error) > 2 else None
            if code == TopicAlreadyExistsError.errno:
                if exist_ok:  # created by another process a moment ago, maybe
                    existed = True
                    continue
                raise SampanError(
                    f"stream {stream!r} already exists in system {self.system!r}; pass "
                    "exist_ok=True to accept it, or use `expand_stream` to grow it"
                )
            refused = self.refused(code, "CREATE", self.topic(stream),
                                   f"creating stream {stream!r}")
            if refused is not None:
                raise refused
            if code:
                raise SampanError(
                    f"Kafka at {self.bootstrap} refused to create stream {stream!r}: "
                    f"{for_code(code).__name__} {message or ''}".rstrip()
                )
        # Brokers learn of a new topic a moment after CreateTopics answers (also when
        # another process created it first): wait until metadata shows it, and from now on
        # take a broker's answer without it as not yet current (`topic_counts`).
        await self.wait_for_count(stream, 1 if existed else partitions)
        self._seen.add(stream)

    async def expand_stream(self, stream: str, partitions: int) -> None:
        count = (await self.partition_counts([stream]))[stream]
        if partitions < count:
            raise UnsupportedOperation(
                f"cannot shrink stream {stream!r} from {count} to {partitions} partitions: "
                "partition counts only grow (records would lose their partition)"
            )
        if partitions == count:
            return
        assert self._admin is not None
        try:
            await self.bounded(
                "CreatePartitions",
                self._admin.create_partitions({self.topic(stream): NewPartitions(partitions)}),
            )
        except (IncompatibleBrokerVersion, UnsupportedVersionError) as exc:
            raise UnsupportedOperation(
                f"CreatePartitions: the broker at {self.bootstrap} cannot add partitions "
                f"(it does not implement that API; tansu does not), so stream {stream!r} "
                f"stays at {count}; expansion needs a broker with CreatePartitions (Apache "
                "Kafka has it) or the local system"
            ) from exc
        except DENIALS as exc:
            raise self.denial(exc, "ALTER", self.topic(stream),
                              f"growing stream {stream!r} to {partitions} partitions") from exc
        except KafkaError as exc:
            raise SampanError(
                f"Kafka at {self.bootstrap} refused to grow stream {stream!r} from {count} to "
                f"{partitions} partitions: {type(exc).__name__}: {exc}"
            ) from exc
        await self.wait_for_count(stream, partitions)

    async def delete_streams(self, streams: Sequence[str]) -> None:
        """DeleteTopics of ``streams`` (names inside the namespace), then wait until
        metadata no longer lists them; one that does not exist is no error."""
        from aiokafka.errors import UnknownTopicOrPartitionError

        if not streams:
            return
        await self.start()
        assert self._admin is not None
        topics = [self.topic(stream) for stream in streams]
        try:
            response = await self.bounded("DeleteTopics", self._admin.delete_topics(topics))
        except (IncompatibleBrokerVersion, UnsupportedVersionError) as exc:
            raise UnsupportedOperation(
                f"DeleteTopics: the broker at {self.bootstrap} cannot delete topics; delete "
                f"{', '.join(topics)} with the broker's own tools") from exc
        for topic, code in response.topic_error_codes:
            refused = self.refused(code, "DELETE", topic, f"deleting topic {topic!r}")
            if refused is not None:
                raise refused
            if code and code != UnknownTopicOrPartitionError.errno:
                raise SampanError(
                    f"Kafka at {self.bootstrap} refused to delete topic {topic!r}: "
                    f"{for_code(code).__name__} (a broker with delete.topic.enable = false "
                    f"refuses every deletion; deleting needs the Delete ACL on the topic)")
        gone = set(streams)
        self._seen -= gone  # absent from now on by design, not a broker's stale answer
        deadline = time.monotonic() + self.options.timeout_s
        while gone & (await self.topic_counts()).keys():
            if time.monotonic() > deadline:
                raise self.unavailable(f"metadata without deleted {', '.join(topics)}",
                                       TimeoutError())
            await asyncio.sleep(_POLL_S)
