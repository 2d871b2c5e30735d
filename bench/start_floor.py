"""Where the floor of a start is: what `sampan run` pays before its first record that
sampan's own code does not decide (issue 51 §2).

    python -m bench.start_floor [--system kafka|local] [--runs 5]

Prints, on the machine it runs on:

- the interpreter: a bare ``python -c pass`` (median of ``--runs``);
- the imports: one `sampan run` of `bench.first_record`'s job (2 workers) with
  ``PYTHONPROFILEIMPORTTIME=1``, so the coordinator and each worker report every import;
  per process, the imports' total (the sum of their own times: the instrumentation adds
  a little) and the packages that take most of it;
- on Kafka, the round trips a fresh job cannot avoid, with plain aiokafka on the same
  broker (medians): a client's bootstrap (metadata), one topic created until the broker
  names its leader, three topics in one request, a producer's start and first
  acknowledged record (acks=all), a consumer's start and first fetched record;
- on Kafka, the coordinator's own start in this process (imports done): each call into
  the Kafka system it makes until the first job model is published, when it began and how
  long it took — the chain of round trips that stands between the lease and the model.

`bench.first_record` times the same start end to end and splits it by the processes' log
lines; this says how much of each part is the interpreter, the imports and the broker.
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import contextlib
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
from kafka_broker import running_kafka  # noqa: E402

from bench.first_record import _load, run_once  # noqa: E402

IMPORT_LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")


def interpreter_seconds(runs: int) -> float:
    """Median wall time of ``python -c pass``: the interpreter's own start and exit."""
    took = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        took.append(time.perf_counter() - started)
    return statistics.median(took)


def import_profile(text: str) -> tuple[float, Counter[str]]:
    """The imports' total own time in one process's ``-X importtime`` lines (seconds), and
    that time per top-level package."""
    by_package: Counter[str] = Counter()
    for match in IMPORT_LINE.finditer(text):
        by_package[match.group(4).split(".")[0]] += int(match.group(1))
    total = sum(by_package.values())
    return total / 1e6, by_package


def print_imports(folder: Path, system: str, bootstrap: str, env: dict[str, str]) -> None:
    """One `sampan run` with every process reporting its imports; print each process's."""
    figures = run_once(system, bootstrap, folder, 1000, 2,
                       {**env, "PYTHONPROFILEIMPORTTIME": "1"})
    print(f"one sampan run with -X importtime (the instrumentation slows it): total "
          f"{figures['total']:.2f} s, CPU: coordinator {figures.get('CPU: coordinator', 0):.2f} s,"
          f" workers together {figures.get('CPU: workers together', 0):.2f} s")
    job = next(p for p in folder.iterdir() if p.name.endswith("-1000"))
    logs = [("coordinator", job / "run.log"),
            *((p.stem, p) for p in sorted((job / "logs").glob("worker-*.log")))]
    for label, path in logs:
        total, by_package = import_profile(path.read_text(errors="replace"))
        top = ", ".join(f"{name} {micros / 1e6:.3f} s ({micros / 1e6 / total:.0%})"
                        for name, micros in by_package.most_common(8))
        print(f"  {label}: imports {total:.3f} s of own time; most: {top}")


async def _timed(call: Awaitable[object]) -> float:
    started = time.perf_counter()
    await call
    return time.perf_counter() - started


async def _created(admin: Any, names: list[str]) -> None:
    """Create ``names`` (one partition each) and wait until the broker names their leaders."""
    from aiokafka.admin import NewTopic

    await admin.create_topics([NewTopic(n, 1, 1) for n in names])
    while True:
        described = await admin.describe_topics(names)
        if all(t["error_code"] == 0 and t["partitions"]
               and all(p["leader"] >= 0 for p in t["partitions"]) for t in described):
            return
        await asyncio.sleep(0.005)


async def kafka_round_trips(bootstrap: str, runs: int) -> dict[str, float]:
    """Medians of the broker round trips a fresh job needs, with plain aiokafka."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient

    took: dict[str, list[float]] = {}

    def note(label: str, seconds: float) -> None:
        took.setdefault(label, []).append(seconds)

    for number in range(runs):
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        note("client bootstrap (metadata)", await _timed(admin.start()))
        one = f"floor-{os.getpid()}-{number}"
        try:
            note("one topic created, leader known", await _timed(_created(admin, [one])))
            note("three topics in one request, leaders known", await _timed(
                _created(admin, [f"{one}-{i}" for i in range(3)])))
        finally:
            await admin.close()
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
        started = time.perf_counter()
        await producer.start()
        try:
            await producer.send_and_wait(one, b"v", key=b"k", partition=0)
        finally:
            await producer.stop()
        note("producer start + first record acknowledged", time.perf_counter() - started)
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        started = time.perf_counter()
        await consumer.start()
        try:
            partition = TopicPartition(one, 0)
            consumer.assign([partition])
            consumer.seek(partition, 0)
            while not await consumer.getmany(timeout_ms=100):
                pass
        finally:
            await consumer.stop()
        note("consumer start + first record fetched", time.perf_counter() - started)
    return {label: statistics.median(values) for label, values in took.items()}


_DEPTH: ContextVar[int] = ContextVar("depth", default=0)


def _traced(owner: type, name: str, origin: float, calls: list[tuple[float, float, str]],
            label: str | None = None) -> None:
    """Replace coroutine method ``owner.name`` by one noting (start, seconds, name) of each
    outermost call (a call made inside another traced call is that call's time)."""
    function: Callable[..., Awaitable[Any]] = getattr(owner, name)

    async def traced(*args: Any, **kwargs: Any) -> Any:
        depth = _DEPTH.get()
        token = _DEPTH.set(depth + 1)
        started = time.perf_counter()
        try:
            return await function(*args, **kwargs)
        finally:
            _DEPTH.reset(token)
            if depth == 0:
                calls.append((started - origin, time.perf_counter() - started, label or name))

    setattr(owner, name, traced)


def trace_coordinator_start(folder: Path, bootstrap: str) -> None:
    """The coordinator's start in this process, `bench.first_record`'s job: its calls into
    the Kafka system until the first model is published (the workers are not started)."""
    import inspect

    from bench.first_record import _job, _prepare, _system_config
    from framework.config import load_config
    from framework.coordinator.kafka_lease import KafkaCoordinatorLease
    from framework.coordinator.process import Coordinator
    from framework.systems.kafka.system import KafkaSystem

    name = f"trace-{os.getpid()}"
    system = _system_config("kafka", bootstrap, folder / name, name)
    config = load_config(_job(folder / name, system, name, 2))
    asyncio.run(_prepare(system))
    calls: list[tuple[float, float, str]] = []
    origin = [0.0]

    async def main() -> float:
        coordinator = Coordinator(config, start_workers=False)
        origin[0] = time.perf_counter()
        for attribute, value in list(vars(KafkaSystem).items()):
            if not attribute.startswith("__") and inspect.iscoroutinefunction(value):
                _traced(KafkaSystem, attribute, origin[0], calls)
        _traced(KafkaCoordinatorLease, "acquire", origin[0], calls, "the lease (acquire)")
        running = asyncio.create_task(coordinator.run())
        try:
            while coordinator.model is None:
                if running.done():
                    running.result()
                await asyncio.sleep(0.002)
            return time.perf_counter() - origin[0]
        finally:
            coordinator.stop.set()
            await asyncio.gather(running, return_exceptions=True)

    saved = dict(vars(KafkaSystem))
    acquire = KafkaCoordinatorLease.acquire
    try:
        took = asyncio.run(main())
    finally:
        for attribute, value in saved.items():
            if not attribute.startswith("__"):
                setattr(KafkaSystem, attribute, value)
        KafkaCoordinatorLease.acquire = acquire  # type: ignore[method-assign]
    print(f"the coordinator's start in process (imports done), run() → model published "
          f"{took:.3f} s; its calls into the Kafka system (start, took), side by side "
          f"where they overlap:")
    for started, seconds, call in sorted(calls):
        if started < took:
            print(f"  {started * 1000:6.0f} ms  +{seconds * 1000:5.0f} ms  {call}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--system", choices=("kafka", "local"), default="kafka")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(ROOT)
    compileall.compile_dir(str(ROOT / "framework"), quiet=1)  # as bench.first_record runs
    compileall.compile_dir(str(ROOT / "groupers"), quiet=1)
    print(f"start floor on {args.system}; load average {_load()}")
    print(f"interpreter (python -c pass), median of {args.runs}: "
          f"{interpreter_seconds(args.runs):.3f} s")
    with contextlib.ExitStack() as stack:
        bootstrap = ""
        if args.system == "kafka":
            bootstrap = stack.enter_context(running_kafka(settings={
                "group.initial.rebalance.delay.ms": "3000"})).bootstrap  # a stock broker
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(
            prefix="sampan-bench-floor-")))
        run_once(args.system, bootstrap, folder, 999, 2, env)  # warm: bytecode, broker
        print_imports(folder, args.system, bootstrap, env)
        if bootstrap:
            print(f"plain aiokafka on the same broker, medians of {args.runs}:")
            for label, seconds in asyncio.run(kafka_round_trips(bootstrap, args.runs)).items():
                print(f"  {label:46} {seconds:.3f} s")
            trace_coordinator_start(folder, bootstrap)
    print(f"load average at the end {_load()}")


if __name__ == "__main__":
    main()
