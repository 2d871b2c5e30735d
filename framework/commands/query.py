"""`sampan query JOB STORE KEY [--prefix P | --range A B | --windows FROM TO] [--owner]
[--json]`: read a running job's state by key, from any of its query endpoints
(docs/queries.md).

A key (and a prefix or range bound) is read by the store's key serde: the text itself
for ``string`` keys, a number for ``int64``, JSON where it parses (else the text) for
the others. A key prints its value as JSON (exit 1 when it has none); a scan prints one
``key<TAB>value`` line per entry, page after page; ``--windows`` one
``start<TAB>end<TAB>value`` line per open window of the record key KEY; ``--json`` prints
whole answers.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from framework.queries.reads import Consistency
from framework.queries.wire import TextKey, to_wire

__all__ = ["add_query_command"]


def add_query_command(commands: Any) -> None:
    """Register `sampan query` on the CLI's subparsers."""
    parser = commands.add_parser(
        "query", help="read a running job's state by key (interactive queries)",
        description="Ask a running job's query endpoints (`[queries] enabled = true`) for "
        "a key of a store declared `keyed_by` an input, or for the entries under a prefix "
        "or in a range of keys. Answers are committed state; any endpoint forwards to the "
        "task that owns the key, and a task that is moving is retried for --wait seconds.")
    parser.add_argument("job", metavar="JOB", help="the job file (TOML)")
    parser.add_argument("store", metavar="STORE", help="a store of the job")
    parser.add_argument("key", metavar="KEY", nargs="?", help="the key to read")
    scan = parser.add_mutually_exclusive_group()
    scan.add_argument("--prefix", metavar="P", help="every entry whose key starts with P")
    scan.add_argument("--range", nargs=2, metavar=("A", "B"),
                      help="every entry with A <= key < B (in serialized-key order)")
    scan.add_argument("--windows", nargs=2, metavar=("FROM", "TO"),
                      help="the open windows of record key KEY in a window store whose "
                      "start is in [FROM, TO) (event-time ms; - for unbounded)")
    scan.add_argument("--owner", action="store_true",
                      help="where KEY lives (task, partition, worker, host, endpoint), "
                      "not its value")
    parser.add_argument("--limit", type=int, metavar="N",
                        help="print at most N entries of a scan (default: all)")
    parser.add_argument("--uncommitted", action="store_true",
                        help="read through the tasks' write buffers: newer values that a "
                        "crash may roll back")
    parser.add_argument("--max-lag", type=int, metavar="N",
                        help="while a key's owner is unavailable (failover), accept an "
                        "answer (for a scan: that task's part) from a standby copy lagging "
                        "its committed state by at most N changelog offsets (default: "
                        "owners only)")
    parser.add_argument("--wait", type=float, default=30.0, metavar="SECONDS",
                        help="how long to retry while the key's task moves or restores "
                        "(default %(default)s)")
    parser.add_argument("--json", action="store_true", help="print answers as JSON")
    parser.set_defaults(handler=_command)


def _command(args: argparse.Namespace) -> int:
    scans = args.prefix is not None or args.range is not None
    if scans == (args.key is not None) or (args.owner and args.key is None):
        print("sampan query: error: give KEY, or --prefix P, or --range A B (one of them)",
              file=sys.stderr)
        return 2
    if args.windows is not None:
        try:
            args.windows = [None if t == "-" else int(t) for t in args.windows]
        except ValueError:
            print(f"sampan query: error: --windows takes two times in milliseconds (or -), "
                  f"got {' '.join(args.windows)}", file=sys.stderr)
            return 2
    return asyncio.run(_query(args))


async def _query(args: argparse.Namespace) -> int:
    from framework.queries.client import Client

    consistency: Consistency = "uncommitted" if args.uncommitted else "committed"
    async with Client(args.job, retry_for=args.wait, consistency=consistency) as client:
        if args.owner:
            owner = await client.owner(args.store, TextKey(args.key))
            if args.json:
                _print(owner, True)
            else:
                print(_owner_line(owner))
            return 0
        if args.windows is not None:
            found = await client.windows(args.store, TextKey(args.key), *args.windows)
            if args.json:
                _print({"key": found.key, "task": found.task, "epoch": found.epoch,
                        "position": found.position, "closed": found.closed,
                        "windows": [{"start": w.start, "end": w.end, "value": w.value}
                                    for w in found.windows]}, True)
            for window in [] if args.json else found.windows:
                print(f"{window.start}\t{window.end}\t{to_wire(window.value).decode()}")
            return 0
        if args.key is not None:
            answer = await client.get(args.store, TextKey(args.key), max_lag=args.max_lag)
            if args.json:
                spare = {"standby": answer.standby, "lag": answer.lag} if answer.standby else {}
                _print({"key": answer.key, "found": answer.found, "value": answer.value,
                        "task": answer.task, "epoch": answer.epoch,
                        "position": answer.position, **spare}, True)
            elif answer.found:
                _print(answer.value, True)
            else:
                print(f"store {args.store!r} has no key {args.key!r}", file=sys.stderr)
            return 0 if answer.found else 1
        entries = await _scan(client, args)
    if args.json:
        _print([{"key": k, "value": v} for k, v in entries], True)
    else:
        for key, value in entries:
            print(f"{key if isinstance(key, str) else to_wire(key).decode()}\t"
                  f"{to_wire(value).decode()}")
    return 0


async def _scan(client: Any, args: argparse.Namespace) -> list[tuple[Any, Any]]:
    """Every entry of the scan (at most ``--limit``), page after page."""
    entries: list[tuple[Any, Any]] = []
    after: str | None = None
    wanted = args.limit
    while wanted is None or len(entries) < wanted:
        size = min(1000, wanted - len(entries)) if wanted is not None else 1000
        if args.prefix is not None:
            page = await client.prefix(args.store, TextKey(args.prefix), limit=size,
                                       after=after, max_lag=args.max_lag)
        else:
            start, end = args.range
            page = await client.range(args.store, TextKey(start), TextKey(end), limit=size,
                                      after=after, max_lag=args.max_lag)
        entries += page.entries
        if page.next is None:
            break
        after = page.next
    return entries


def _owner_line(owner: dict[str, Any]) -> str:
    where = (f"worker {owner['worker']}" if owner["worker"] is not None
             else "no worker (moving)")
    host = f" on host {owner['host']}" if owner.get("host") else ""
    url = f" at {owner['url']}" if owner.get("url") else ""
    return (f"task {owner['task']} (partition {owner['partition']} of {owner['stream']}), "
            f"{where}{host}{url}, epoch {owner['epoch']}")


def _print(document: Any, as_json: bool) -> None:
    print(to_wire(document).decode() if as_json else document)
