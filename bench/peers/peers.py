"""The three peers and how each is made ready and started.

- sampan: this checkout's interpreter runs `bench.peers.sampan_peer` (throughput) or
  ``sampan run`` on the job folder it writes (expansion).
- Kafka Streams: `kstreams/` (a Maven project, ``kafka-streams`` at the broker's release)
  is built with ``mvn -q -B package`` when its sources are newer than its build; the JVM
  runs ``sampan.bench.SumApp`` from ``target/classes`` and ``target/lib`` (both ignored by
  git; Maven's cache is ``~/.m2``). JVM defaults (heap, GC) are kept.
- Samza `SAMZA_VERSION` (expansion runs only): `samza/`, built and run the same way; a
  low-level task, standalone with the PassthroughJobCoordinator (no ZooKeeper).
- Quix Streams `QUIX_VERSION`: a virtualenv of its own under ``~/.cache/sampan/bench``
  (``$SAMPAN_BENCH_CACHE`` moves it), made on first use with pip; never in sampan's.

Every peer gets the same `RunSpec`: its input and output topics, a unique name (job,
application id or consumer group: also the prefix of its internal topics), the guarantee,
a commit interval (1 s for all three: sampan's default; Kafka Streams' is 30 s at least
once and 100 ms exactly once, Quix Streams' 5 s) and how many records to stop after.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from bench.peers.broker import KAFKA_VERSION
from bench.peers.sampan_peer import write_job

__all__ = ["EXPANSION_PEERS", "KSTREAMS_DIR", "PEERS", "QUIX_VERSION", "SAMZA_VERSION",
           "KafkaStreamsPeer", "Peer", "QuixPeer", "RunSpec", "SampanPeer", "SamzaPeer",
           "bench_cache", "peer_named"]

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
KSTREAMS_DIR = HERE / "kstreams"
QUIX_VERSION = "3.28.1"
SAMZA_VERSION = "1.8.0"
"""Samza's last release (its pom is `samza/pom.xml`)."""
COMMIT_MS = 1000
METADATA_REFRESH_MS = 5000
"""How often Kafka Streams' and Quix Streams' consumers refresh metadata (their clients'
default is 5 min); sampan's Kafka system refreshes every 5 s and its coordinator polls
partition counts every 2 s."""
BUILD_TIMEOUT_S = 1200.0


def bench_cache() -> Path:
    """Where the bench keeps what it installs for peers."""
    root = os.environ.get("SAMPAN_BENCH_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "sampan" / "bench"


@dataclass(frozen=True)
class RunSpec:
    """One run of one peer."""

    bootstrap: str
    input_topic: str
    output_topic: str
    name: str
    guarantee: str
    folder: Path
    count: int = 0
    """Stop after this many records; 0: run until stopped (SIGTERM)."""
    commit_ms: int = COMMIT_MS


class Peer(Protocol):
    name: str

    def version(self) -> str: ...

    def prepare(self) -> None:
        """Build or install what the peer needs (once; quick when already done)."""

    def command(self, spec: RunSpec) -> list[str]:
        """The process to start for ``spec`` (one process; it prints a PEER-REPORT)."""


class SampanPeer:
    name = "sampan"

    def version(self) -> str:
        names = []
        for flag in ("--abbrev-ref", "--short"):
            done = subprocess.run(["git", "-C", str(REPO), "rev-parse", flag, "HEAD"],
                                  capture_output=True, text=True)
            names.append(done.stdout.strip() if done.returncode == 0 else "?")
        return "@".join(names)

    def prepare(self) -> None:
        pass

    def command(self, spec: RunSpec) -> list[str]:
        return [sys.executable, "-m", "bench.peers.sampan_peer", "--folder", str(spec.folder),
                "--bootstrap", spec.bootstrap, "--input", spec.input_topic,
                "--output", spec.output_topic, "--name", spec.name,
                "--count", str(spec.count), "--guarantee", spec.guarantee,
                "--commit-ms", str(spec.commit_ms)]

    def run_command(self, spec: RunSpec) -> list[str]:
        """``sampan run`` of the same job (a coordinator and one worker process): the
        product's own path, with live expansion."""
        job = write_job(spec.folder, bootstrap=spec.bootstrap, name=spec.name,
                        input_topic=spec.input_topic, output_topic=spec.output_topic,
                        guarantee=spec.guarantee, commit_ms=spec.commit_ms)
        return [str(Path(sys.executable).parent / "sampan"), "run", str(job)]


class MavenPeer:
    """A JVM peer built from a Maven project in this folder (``target/`` is git-ignored)."""

    name = ""
    project: Path = HERE
    main_class = ""

    def _built(self) -> bool:
        marker = self.project / "target" / "classes" / Path(*self.main_class.split("."))
        marker = marker.with_suffix(".class")
        if not marker.exists() or not (self.project / "target" / "lib").is_dir():
            return False
        sources = [self.project / "pom.xml", *self.project.glob("src/**/*.java")]
        return all(source.stat().st_mtime <= marker.stat().st_mtime for source in sources)

    def prepare(self) -> None:
        if self._built():
            return
        if shutil.which("mvn") is None or shutil.which("java") is None:
            raise RuntimeError(f"building the {self.name} peer needs `mvn` and Java 17+ "
                               "(Debian: apt-get install maven openjdk-17-jdk-headless)")
        command = ["mvn", "-q", "-B", "-f", str(self.project / "pom.xml"), "package"]
        print(f"building the {self.name} peer: {' '.join(command)}", flush=True)
        done = subprocess.run(command, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}):\n"
                               f"{(done.stdout + done.stderr)[-4000:]}")

    def java(self) -> list[str]:
        """``java`` with the JVM's defaults (plus ``$SAMPAN_BENCH_JVM_OPTIONS``, e.g. a
        flight recording for a profile) and the built classpath."""
        target = self.project / "target"
        return ["java", *os.environ.get("SAMPAN_BENCH_JVM_OPTIONS", "").split(),
                "-cp", f"{target / 'classes'}:{target / 'lib'}/*", self.main_class]


class KafkaStreamsPeer(MavenPeer):
    name = "Kafka Streams"
    project = KSTREAMS_DIR
    main_class = "sampan.bench.SumApp"

    def version(self) -> str:
        return str(KAFKA_VERSION)

    def command(self, spec: RunSpec) -> list[str]:
        return [*self.java(), "--bootstrap", spec.bootstrap,
                "--input", spec.input_topic, "--output", spec.output_topic,
                "--app-id", spec.name, "--state-dir", str(spec.folder / "state"),
                "--count", str(spec.count), "--guarantee", spec.guarantee,
                "--commit-ms", str(spec.commit_ms),
                "--metadata-refresh-ms", str(METADATA_REFRESH_MS)]


class SamzaPeer(MavenPeer):
    """Samza runs in the expansion runs only, at least once (its only guarantee)."""

    name = "Samza"
    project = HERE / "samza"
    main_class = "sampan.bench.SamzaSum"
    guarantees = ("at-least-once",)

    def version(self) -> str:
        return SAMZA_VERSION

    def command(self, spec: RunSpec) -> list[str]:
        if spec.count:
            raise ValueError("the Samza peer runs until stopped (expansion runs only)")
        return [*self.java(), "--bootstrap", spec.bootstrap,
                "--input", spec.input_topic, "--output", spec.output_topic,
                "--name", spec.name, "--state-dir", str(spec.folder / "state"),
                "--commit-ms", str(spec.commit_ms),
                "--metadata-refresh-ms", str(METADATA_REFRESH_MS)]


class QuixPeer:
    name = "Quix Streams"

    def version(self) -> str:
        return QUIX_VERSION

    @property
    def python(self) -> Path:
        return bench_cache() / f"quix-{QUIX_VERSION}" / "bin" / "python"

    def prepare(self) -> None:
        venv = self.python.parents[1]
        if (venv / "complete").exists():
            return
        print(f"installing Quix Streams {QUIX_VERSION} into {venv}", flush=True)
        shutil.rmtree(venv, ignore_errors=True)
        for command in ([sys.executable, "-m", "venv", str(venv)],
                        [str(self.python), "-m", "pip", "install", "-q",
                         f"quixstreams=={QUIX_VERSION}"]):
            done = subprocess.run(command, capture_output=True, text=True,
                                  timeout=BUILD_TIMEOUT_S)
            if done.returncode != 0:
                raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}):\n"
                                   f"{(done.stdout + done.stderr)[-4000:]}")
        (venv / "complete").write_text(QUIX_VERSION + "\n")

    def command(self, spec: RunSpec) -> list[str]:
        return [str(self.python), str(HERE / "quix_peer.py"), "--bootstrap", spec.bootstrap,
                "--input", spec.input_topic, "--output", spec.output_topic,
                "--name", spec.name, "--state-dir", str(spec.folder / "state"),
                "--count", str(spec.count), "--guarantee", spec.guarantee,
                "--commit-ms", str(spec.commit_ms),
                "--metadata-refresh-ms", str(METADATA_REFRESH_MS)]


PEERS: tuple[Peer, ...] = (SampanPeer(), KafkaStreamsPeer(), QuixPeer())
"""The throughput runs' peers."""
EXPANSION_PEERS: tuple[Peer, ...] = (*PEERS, SamzaPeer())
"""The expansion runs' peers."""


def peer_named(name: str) -> Peer:
    wanted = name.lower().replace(" ", "").replace("-", "")
    for peer in EXPANSION_PEERS:
        if peer.name.lower().replace(" ", "") == wanted:
            return peer
    raise KeyError(f"no peer {name!r}; peers: {', '.join(p.name for p in PEERS)}")
