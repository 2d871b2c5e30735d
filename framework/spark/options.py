"""The ``sampan`` DataSource's options, parsed once on the driver into plain picklable values.

=================  =====================================================================
option             meaning
=================  =====================================================================
job                path of the job file (required): systems, streams and serdes come from it
stream             qualified stream ``"<system>.<stream>"`` (required)
partitions         comma list of partitions to read (default: all)
startingOffsets    ``earliest`` (default), ``latest`` or JSON ``{"0": 12, "3": 40}``
endingOffsets      ``latest`` (default), ``earliest`` or JSON; a position, exclusive
raw                ``true``: key and value as binary, no serde; default ``false``
=================  =====================================================================
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from framework.spark.errors import SparkOptionError
from framework.systems.base import OffsetRange

__all__ = ["PartitionRange", "SourceOptions", "resolve_offsets"]


@dataclass(frozen=True)
class PartitionRange:
    """One Spark input partition: one stream partition between two positions."""

    job: str
    stream: str
    partition: int
    start: int
    end: int
    raw: bool


@dataclass(frozen=True)
class SourceOptions:
    """Validated DataSource options (see the module table)."""

    job: str
    stream: str
    partitions: tuple[int, ...] | None = None
    starting: str = "earliest"
    ending: str = "latest"
    raw: bool = False

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SourceOptions:
        """Check the options Spark passed (keys are case-insensitive there)."""
        lower = {k.lower(): v for k, v in options.items()}
        for required in ("job", "stream"):
            if not lower.get(required):
                raise SparkOptionError(
                    f'the sampan DataSource needs option "{required}"; e.g. '
                    '.option("job", "job.toml").option("stream", "local.words")')
        stream = lower["stream"]
        if "." not in stream:
            raise SparkOptionError(
                f'option "stream" = {stream!r} is not qualified; use "<system>.<stream>", '
                'e.g. "local.words"')
        partitions = None
        if lower.get("partitions"):
            try:
                partitions = tuple(sorted({int(p) for p in lower["partitions"].split(",")}))
            except ValueError:
                raise SparkOptionError(
                    f'option "partitions" = {lower["partitions"]!r}: use a comma list of '
                    'partition numbers, e.g. "0,2"') from None
        raw = lower.get("raw", "false").strip().lower()
        if raw not in ("true", "false"):
            raise SparkOptionError(f'option "raw" = {raw!r}: use "true" or "false"')
        return cls(job=lower["job"], stream=stream, partitions=partitions,
                   starting=lower.get("startingoffsets", "earliest"),
                   ending=lower.get("endingoffsets", "latest"), raw=raw == "true")


def _positions(
    spec: str, name: str, ranges: Mapping[int, OffsetRange], stream: str
) -> dict[int, int]:
    text = spec.strip()
    if text == "earliest":
        return {p: r.oldest for p, r in ranges.items()}
    if text == "latest":
        return {p: r.end for p, r in ranges.items()}
    try:
        given = {int(p): int(o) for p, o in json.loads(text).items()}
    except (ValueError, AttributeError, TypeError):
        raise SparkOptionError(
            f'option "{name}" = {spec!r}: use "earliest", "latest" or JSON partition → '
            'position, e.g. {"0": 10, "1": 25}') from None
    unknown = sorted(set(given) - set(ranges))
    if unknown:
        raise SparkOptionError(
            f'option "{name}" names partitions {unknown} that {stream} does not have '
            f"(it has {len(ranges)})")
    default = "oldest" if name == "startingOffsets" else "end"
    return {p: given.get(p, getattr(r, default)) for p, r in ranges.items()}


def resolve_offsets(
    options: SourceOptions, ranges: Mapping[int, OffsetRange]
) -> list[PartitionRange]:
    """One `PartitionRange` per selected partition; partitions missing from a JSON spec
    read from their oldest offset / to their end."""
    missing = sorted(set(options.partitions or ()) - set(ranges))
    if missing:
        raise SparkOptionError(
            f'option "partitions" names {missing}, which {options.stream} does not have '
            f"(it has partitions 0..{len(ranges) - 1})")
    starts = _positions(options.starting, "startingOffsets", ranges, options.stream)
    ends = _positions(options.ending, "endingOffsets", ranges, options.stream)
    chosen = options.partitions if options.partitions is not None else sorted(ranges)
    return [PartitionRange(options.job, options.stream, p, starts[p], max(starts[p], ends[p]),
                           options.raw) for p in chosen]
