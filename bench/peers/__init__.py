"""Peers side by side on one real Apache Kafka broker: sampan, Kafka Streams, Quix Streams.

``python -m bench.peers`` (see `bench.peers.__main__`) runs the same stateful per-key sum
in each, one process each, and prints the tables of docs/performance.md: throughput, CPU,
memory and startup under both guarantees (`bench.peers.throughput`), and what each does
through a live 2 → 4 expansion of its input (`bench.peers.expansion`). Every output of
every run is checked against the ground truth (`bench.peers.verdict`).
"""
