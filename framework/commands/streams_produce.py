"""`sampan streams produce SYSTEM.STREAM`: records from stdin, encoded with the stream's
serdes (JSON lines), or raw bytes written as they are — ``--value-hex``/``--key-hex`` for
one record, ``--raw`` for one record per stdin line — so a job's decode policy
(``[errors] policy``) can be tried on records its serdes refuse."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable

from framework.commands.stream_ref import missing_stream, split_stream, started_system
from framework.config import JobConfig, load_config
from framework.config.serdes import get_serde
from framework.errors import ConfigError, SampanError, SerdeError
from framework.systems.base import ProducerRecord
from framework.wording import counted

__all__ = ["add_produce_arguments", "produce"]

PRODUCE_BATCH = 1000
_EXAMPLE = '{"key": "k", "value": {...}}'


def add_produce_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `sampan streams produce` beyond the stream and the job."""
    raw = parser.add_argument_group(
        "raw bytes", "written as they are, without the stream's serdes (e.g. to try a job's "
        "[errors] policy on a record it cannot decode)")
    raw.add_argument("--value-hex", metavar="HEX",
                     help="write one record whose value is these bytes (hex, e.g. 7b6f6f70); "
                     "stdin is not read")
    raw.add_argument("--raw", action="store_true",
                     help="one record per stdin line, its value the line's bytes (without "
                     "the line end)")
    raw.add_argument("--key-hex", metavar="HEX",
                     help="with --value-hex or --raw: the records' key bytes (default none)")
    raw.add_argument("--partition", type=int, metavar="N",
                     help="with --value-hex or --raw: write to partition N (default: placed "
                     "by the key, or spread when there is none)")


def produce(args: argparse.Namespace) -> int:
    config = load_config(args.job)
    system_name, stream = split_stream(config, args.stream)
    records = _raw_records(args, stream) if _is_raw(args) else _json_records(
        config, args.stream, stream)

    async def go() -> int:
        system = await started_system(config, system_name)
        written = 0
        try:
            existing = await system.list_streams()
            if stream not in existing:
                declared = config.streams.get(args.stream)
                if declared is None or declared.partitions is None:
                    raise missing_stream(config, args.stream, existing)
                await system.create_stream(stream, declared.partitions,
                                           compacted=declared.compacted, exist_ok=True)
                print(f"created {args.stream} with {counted(declared.partitions, 'partition')}"
                      f", as {config.path.name} declares", file=sys.stderr)
            if system.atomic_commit:  # the local log: one transaction, all or nothing
                return len(await system.produce(records))
            for start in range(0, len(records), PRODUCE_BATCH):
                written += len(await system.produce(records[start:start + PRODUCE_BATCH]))
            return written
        except SampanError as error:
            if written:
                raise SampanError(
                    f"{error}; {written} of {len(records)} records (the first {written} "
                    f"lines with a record) were written before the failure, the rest were "
                    f"not") from None
            raise
        finally:
            await system.close()

    total = asyncio.run(go())
    print(f"produced {counted(total, 'record')} to {args.stream}", file=sys.stderr)
    return 0


def _is_raw(args: argparse.Namespace) -> bool:
    """Whether raw bytes were asked for; `ConfigError` for options that do not go together."""
    if args.value_hex is not None and args.raw:
        raise ConfigError("--value-hex writes one record and --raw one per stdin line: "
                          "pass one of them")
    raw = args.value_hex is not None or args.raw
    if not raw and (args.key_hex is not None or args.partition is not None):
        raise ConfigError("--key-hex and --partition go with --value-hex or --raw; for JSON "
                          'lines put "partition": N in the line')
    if args.partition is not None and args.partition < 0:
        raise ConfigError(f"--partition {args.partition}: a partition is a number ≥ 0")
    return raw


def _hex(option: str, text: str) -> bytes:
    try:
        return bytes.fromhex(text)
    except ValueError as error:
        raise ConfigError(f"{option} {text!r}: not hexadecimal bytes ({error}); write two "
                          f"hex digits per byte, e.g. {option} 7b6f6f70") from None


def _raw_records(args: argparse.Namespace, stream: str) -> list[ProducerRecord]:
    """``--value-hex``'s one record, or one per stdin line (``--raw``), as bytes."""
    key = None if args.key_hex is None else _hex("--key-hex", args.key_hex)
    if args.value_hex is not None:
        values = [_hex("--value-hex", args.value_hex)]
    else:
        values = [line.rstrip(b"\r\n") for line in sys.stdin.buffer]
    return [ProducerRecord(stream, key, value, partition=args.partition) for value in values]


def _json_records(config: JobConfig, qualified: str, stream: str) -> list[ProducerRecord]:
    """Every stdin line as a record encoded with the stream's serdes; every line is
    checked before anything is written, so a bad line writes nothing."""
    declared = config.stream(qualified)
    key_serde = get_serde(declared.key_serde, search_path=config.root)
    value_serde = get_serde(declared.value_serde, search_path=config.root)
    encode = _encoder(qualified, stream, f"{declared.key_serde}/{declared.value_serde}",
                      key_serde.to_bytes, value_serde.to_bytes)
    return [encode(line_no, line) for line_no, line in enumerate(sys.stdin, 1) if line.strip()]


def _encoder(qualified: str, stream: str, serdes: str, key_bytes: Callable[[object], bytes],
             value_bytes: Callable[[object], bytes]
             ) -> Callable[[int, str], ProducerRecord]:
    def encode(line_no: int, line: str) -> ProducerRecord:
        try:
            item = json.loads(line)
        except json.JSONDecodeError as error:
            raise ConfigError(f"stdin line {line_no}: not JSON ({error}); write one object "
                              f"per line like {_EXAMPLE}") from None
        if not isinstance(item, dict):
            raise ConfigError(f"stdin line {line_no}: got a JSON {type(item).__name__}; write "
                              f"one object per line like {_EXAMPLE}")
        unknown = sorted(set(item) - {"key", "value", "partition", "timestamp"})
        if "value" not in item:
            raise ConfigError(
                f"stdin line {line_no}: no \"value\" field (found {sorted(item)}); write "
                f'{_EXAMPLE}, or "value": null for a tombstone (a delete)')
        if unknown:
            fields = "field" if len(unknown) == 1 else "fields"
            raise ConfigError(f"stdin line {line_no}: unknown {fields} {unknown}; a line has "
                              f'"key", "value" and optionally "partition" and "timestamp"')
        key, value, partition = item.get("key"), item["value"], item.get("partition")
        if partition is not None and (not isinstance(partition, int) or partition < 0):
            raise ConfigError(f"stdin line {line_no}: \"partition\" must be an integer ≥ 0, "
                              f"got {partition!r}")
        timestamp = item.get("timestamp")
        if timestamp is not None and (type(timestamp) is not int or timestamp < 0):
            raise ConfigError(f"stdin line {line_no}: \"timestamp\" must be the record's time "
                              f"in milliseconds since the epoch, an integer ≥ 0, got "
                              f"{timestamp!r}")
        try:
            return ProducerRecord(
                stream, None if key is None else key_bytes(key),
                None if value is None else value_bytes(value), partition=partition,
                timestamp=timestamp)
        except Exception as error:
            raise SerdeError(f"stdin line {line_no}: cannot encode for {qualified} "
                             f"({serdes}): {error}") from None
    return encode
