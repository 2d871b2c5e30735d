"""The Kafka client's (aiokafka's) own log lines, kept out of the operator's way.

aiokafka logs every retry it makes: a connection refused, a group coordinator not known
yet, a heartbeat answered "rebalancing", a write retried because a partition's leader
moved — most of them resolve themselves within seconds, and sampan says on its own what a
failure means for the job (the broker it cannot reach, since when, what to check). Every
aiokafka record goes through one gate (`install_client_log_gate`, done by
`framework.logformat.configure_logging` and by the `sampan` command for every process):

- a retry that resolves itself stays at DEBUG;
- the same condition still retried after `PERSISTS_S` becomes one sampan line saying what
  it means for the job, once per episode (an episode ends after `EPISODE_GAP_S` without
  the condition);
- ``Unable connect to …`` never reaches the user: sampan's own error says it;
- anything else is let through by `LibraryThrottle`.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["EPISODE_GAP_S", "PERSISTS_S", "ClientFutureFilter", "ClientLogGate",
           "LibraryThrottle", "install_client_log_gate"]

PERSISTS_S = 10.0
"""How long a condition aiokafka keeps retrying lasts before sampan says what it means."""
EPISODE_GAP_S = 30.0
"""A condition not seen for this long is over: its next occurrence starts a new episode."""


class LibraryThrottle(logging.Filter):
    """The Kafka client's own lines: at most one per message every ``window_s``, and its
    errors logged as warnings, an exception folded into the line (no traceback). With a
    broker down, aiokafka logs the same connection error
    several times a second from every client of every process (thousands of lines a
    minute), while sampan says once what is unreachable and since when, and decides what
    is an error of the job. The line let through after a quiet spell says how many were
    left out. One filter serves every handler (each record is judged once)."""

    def __init__(self, prefix: str = "aiokafka", window_s: float = 60.0) -> None:
        super().__init__()
        self.prefix = prefix
        self.window_s = window_s
        self._seen: dict[tuple[str, object], tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith(self.prefix):
            return True
        fields = vars(record)  # the verdict travels with the record to every handler
        verdict = fields.get("sampan_throttle")
        if verdict is None:
            verdict = fields["sampan_throttle"] = self._judge(record)
        return bool(verdict)

    def _judge(self, record: logging.LogRecord) -> bool:
        key = (record.name, record.msg)
        now = time.monotonic()
        last, left_out = self._seen.get(key, (float("-inf"), 0))
        if now - last < self.window_s:
            self._seen[key] = (last, left_out + 1)
            return False
        self._seen[key] = (now, 0)
        if left_out:
            record.msg = (f"{record.getMessage()} ({left_out} more like it in the last "
                          f"{now - last:.0f} s)")
            record.args = None
        if record.exc_info and record.exc_info[1] is not None:
            record.msg, record.args = f"{record.getMessage()}: {_chain(record.exc_info[1])}", None
            record.exc_info, record.exc_text = None, None
        if record.levelno == logging.ERROR:
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def _chain(error: BaseException) -> str:
    """An exception and what caused it on one line (a library's traceback is not the job's
    error: sampan says what failed and what to do)."""
    parts: list[str] = []
    seen: BaseException | None = error
    while seen is not None and len(parts) < 4:
        parts.append(f"{type(seen).__name__}: {seen}")
        seen = seen.__cause__ or seen.__context__
    return " <- ".join(parts)


Args = tuple[object, ...]


@dataclass(frozen=True)
class _Retry:
    """A message aiokafka logs while it retries: what the condition is about (from the
    record's arguments) and the sampan line once it lasted ``seconds`` (None: never said —
    sampan reports that condition itself)."""

    subject: Callable[[Args], str]
    line: Callable[[str, Args, float], str] | None


def _arg(index: int) -> Callable[[Args], str]:
    return lambda args: str(args[index]) if len(args) > index else "?"


def _waiting(seconds: float) -> str:
    return f"for {seconds:.0f} s"


_RETRIES: dict[str, _Retry] = {
    # Connections and metadata: sampan names an unreachable broker and what to check
    # (a refused connection, the system unreachable since …) in its own words.
    'Unable connect to "%s:%s": %s': _Retry(lambda a: f"{a[:2]}", None),
    "Unable connect to node with id %s: %s": _Retry(_arg(0), None),
    'Unable to request metadata from "%s:%s": %s': _Retry(lambda a: f"{a[:2]}", None),
    "Unable to request metadata from node with id %s: %r": _Retry(_arg(0), None),
    "Unable to update metadata from %s": _Retry(_arg(0), None),
    # Denials: sampan stops on them with the missing ACL in its own words.
    "Not authorized to read from topic %s.": _Retry(_arg(0), None),
    "Topic %s is not authorized for this client": _Retry(_arg(0), None),
    # The group protocol (a host's membership, the coordinator's lease on Kafka).
    "Group Coordinator Request failed: %s": _Retry(lambda a: "", lambda _, a, s: (
        f"Kafka has had no coordinator for this process's group {_waiting(s)} ({a[0]}); "
        "it keeps asking (a broker starting, or the group's __consumer_offsets partition "
        "without a leader) and the process waits for it")),
    "Heartbeat failed for group %s: coordinator (node %s) is either not started or not "
    "valid": _Retry(_arg(0), lambda group, a, s: (
        f"Kafka: the coordinator of group {group} has not been available {_waiting(s)} "
        f"(GroupCoordinatorNotAvailableError); the process looks for it and waits")),
    "Heartbeat failed for group %s because it is rebalancing": _Retry(
        _arg(0), lambda group, a, s: (
            f"Kafka: group {group} has been rebalancing {_waiting(s)}; this process "
            "waits for the round to end")),
    "Heartbeat failed for group %s: generation id is not  current.": _Retry(_arg(0), None),
    "Heartbeat failed: local member_id was not recognized; resetting and re-joining group":
        _Retry(lambda a: "", None),
    "Heartbeat send request failed: %s. Will retry.": _Retry(lambda a: "", lambda _, a, s: (
        f"Kafka: this process's heartbeats to its group have failed {_waiting(s)} ({a[0]}); "
        "the group drops it after its session timeout unless one gets through")),
    # Writes and reads retried while a partition's leader moves (NotLeaderForPartition).
    "Got error produce response on topic-partition %s, retrying. Error: %s": _Retry(
        _arg(0), lambda tp, a, s: (
            f"Kafka: writes to {tp} have been retried {_waiting(s)} ({a[1]}): its leader "
            "is moving or unavailable; the records wait, none is lost")),
    "Attempt to fetch offsets for partition %s failed due to: %s": _Retry(
        _arg(0), lambda tp, a, s: (
            f"Kafka: reading the offsets of {tp} has failed {_waiting(s)} ({a[1]}); "
            "retrying")),
    "Failed fetch messages from %s: %s": _Retry(_arg(0), lambda node, a, s: (
        f"Kafka: fetches from broker node {node} have failed {_waiting(s)} ({a[1]}); "
        "retrying")),
    "Cannot send %r to %s: %r": _Retry(_arg(1), lambda node, a, s: (
        f"Kafka: requests to broker node {node} have failed {_waiting(s)} ({a[2]!r}); "
        "retrying")),
}


class ClientLogGate(logging.Filter):
    """Judges each aiokafka record (see the module): True to let it through, rewritten
    as a sampan line when a retried condition persists; False for what stays at DEBUG."""

    def __init__(self, clock: Callable[[], float] = time.monotonic,
                 persists_s: float = PERSISTS_S, episode_gap_s: float = EPISODE_GAP_S,
                 throttle: LibraryThrottle | None = None) -> None:
        super().__init__()
        self.clock = clock
        self.persists_s = persists_s
        self.episode_gap_s = episode_gap_s
        self.throttle = throttle or LibraryThrottle()
        self._episodes: dict[tuple[str, str], tuple[float, float, bool]] = {}
        """(message, subject) → (first seen, last seen, said) of its current episode."""

    def filter(self, record: logging.LogRecord) -> bool:
        retry = _RETRIES.get(str(record.msg))
        if retry is None:
            return self.throttle.filter(record)
        args = record.args if isinstance(record.args, tuple) else ()
        key = (str(record.msg), retry.subject(args))
        now = self.clock()
        first, last, said = self._episodes.get(key, (now, now, False))
        if now - last > self.episode_gap_s:
            first, said = now, False
        lasted = now - first
        say = retry.line is not None and not said and lasted >= self.persists_s
        self._episodes[key] = (first, now, said or say)
        if not say:
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            return logging.getLogger().isEnabledFor(logging.DEBUG)
        assert retry.line is not None
        record.msg, record.args = retry.line(key[1], args, lasted), None
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        record.exc_info, record.exc_text = None, None
        return True


class _Gate(logging.Handler):
    """The aiokafka logger's one handler: what its filter lets through goes on to the
    root logger's handlers (stderr, the log file; Python's last resort when none)."""

    def emit(self, record: logging.LogRecord) -> None:
        logging.getLogger().handle(record)


_installed = threading.Lock()


class ClientFutureFilter(logging.Filter):
    """asyncio's "Future exception was never retrieved" for a future of aiokafka's own
    connections (a connection the broker closed or a TLS alert it sent): the client
    dropped that future, and sampan has already said what failed. Anything else of
    asyncio's goes through."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if error is None or not record.getMessage().startswith(
                "Future exception was never retrieved"):
            return True
        frames = traceback.extract_tb(error.__traceback__)
        return not any("aiokafka" in frame.filename for frame in frames)


def install_client_log_gate() -> None:
    """Route every aiokafka record through one `ClientLogGate`, and keep aiokafka's
    dropped futures out of asyncio's log (once per process)."""
    with _installed:
        library = logging.getLogger("aiokafka")
        if any(isinstance(h, _Gate) for h in library.handlers):
            return
        gate = _Gate()
        gate.addFilter(ClientLogGate())
        library.addHandler(gate)
        library.propagate = False
        logging.getLogger("asyncio").addFilter(ClientFutureFilter())
