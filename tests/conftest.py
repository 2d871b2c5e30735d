"""Shared fixtures: the session's Apache Kafka broker and tansu broker (launchers in
`tests/kafka_broker.py`), and the one local Spark session of the test run."""

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import kafka_broker as brokers
import pytest
from kafka_broker import KafkaBroker, KafkaCluster, TansuBroker

pytest.register_assert_rewrite("jobs")  # the job harness's checks show their values

if TYPE_CHECKING:
    from secured_kafka import SecuredKafka

__all__ = ["kafka_broker", "kafka_cluster", "kafka_own_broker", "secured_kafka", "spark",
           "tansu_broker"]

SLOW = {"coordinator", "drill", "examples", "kafka", "eos", "spark", "windows", "docs", "bench",
        "hosts", "faults", "security"}
"""Test folders whose tests run real processes, brokers or Spark."""
KAFKA_FIXTURES = {"kafka_broker", "kafka_cluster", "kafka_own_broker", "tansu_broker",
                  "secured_kafka"}
MODULE_FIXTURES = {"_module_broker", "_module_cluster"}
"""Module-scoped fixtures: a module using one runs on one pytest process."""


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark `slow` by folder and `kafka` by fixture, so `-m 'not slow'` is a quick loop.

    Under ``--dist loadgroup`` (the README's test command) every test that uses the Spark
    session runs on one pytest process (each process starting a Spark JVM of its own cost a
    second session's start and its memory and CPU for the rest of the run), so does every
    test on the secured broker (one secured broker for the run), and a module
    whose tests share a module-scoped broker or cluster runs on one process (it starts
    once); any other test goes wherever a process is free, so that no process ends the run
    alone on a long module.

    The modules with a slow or Kafka test are collected first (each module's tests stay
    together, in their order): xdist hands out the largest groups first and every other
    test in collection order, so the quick tests come last and fill the processes' ends
    instead of one process ending the run alone on an end-to-end test that started late.
    """
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        group = ("spark" if "spark" in fixtures else "secured" if "secured_kafka" in fixtures
                 else str(item.path) if MODULE_FIXTURES & fixtures else item.nodeid)
        item.add_marker(pytest.mark.xdist_group(group))
        parts = item.path.parts
        if "tests" in parts and SLOW & set(parts[parts.index("tests") + 1:-1]):
            item.add_marker(pytest.mark.slow)
        if {"kafka", "eos", "hosts", "faults", "security"} & set(parts) or KAFKA_FIXTURES & set(
                getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.kafka)
    long = {item.path for item in items
            if item.get_closest_marker("slow") or item.get_closest_marker("kafka")}
    items.sort(key=lambda item: item.path not in long)  # stable: the order within stays


def require_kafka() -> None:
    """Skip (fail under ``CI=true``) where no Apache Kafka broker can run, saying why."""
    problem = brokers.java_problem()
    if problem is None:
        return
    message = f"Apache Kafka {brokers.KAFKA_VERSION} cannot run here: {problem}"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message + " (CI=true: the Kafka tests must run)", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[KafkaBroker]:
    """One real Apache Kafka node (KRaft) for the whole pytest process, stopped at its end.

    Tests that share it use topic and job names of their own (a uuid or the test's name).
    """
    require_kafka()
    broker = brokers.start_kafka()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def secured_kafka() -> Iterator["SecuredKafka"]:
    """Apache Kafka as production runs it (`tests/secured_kafka.py`): a SASL_SSL listener
    (PLAIN, SCRAM-SHA-256/512, OAUTHBEARER) and a mutual-TLS one, with a CA made for the
    run and the StandardAuthorizer denying what no ACL allows; one per pytest process."""
    require_kafka()
    from secured_kafka import start_secured_kafka

    broker = start_secured_kafka()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="module")
def _module_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """The stoppable one-node broker of one test module, stopped when its tests are done."""
    require_kafka()
    broker = brokers.start_kafka(tmp_path_factory.mktemp("kafka"))
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def kafka_own_broker(_module_broker: KafkaBroker) -> KafkaBroker:
    """A one-node Apache Kafka that the test may stop and start again (the shared
    `kafka_broker` must stay up): shared by the tests of one module, running when each
    test starts — started again on its own folders if an earlier test left it stopped."""
    if not all(node.alive for node in _module_broker.nodes):
        _module_broker.start()
    return _module_broker


@pytest.fixture(scope="module")
def _module_cluster() -> Iterator[KafkaCluster]:
    """The 3-node cluster of one test module, stopped when the module's tests are done."""
    require_kafka()
    cluster = brokers.start_cluster(3)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def kafka_cluster(_module_cluster: KafkaCluster) -> KafkaCluster:
    """A 3-node KRaft cluster (replication factor 3, min.insync.replicas 2) that the test
    may kill nodes of: shared by the tests of one module (a cluster's start is the
    costliest thing a test here does), with every node running when each test starts —
    a node an earlier test left killed is started again on its own folders."""
    if not all(node.alive for node in _module_cluster.nodes):
        _module_cluster.start()  # launches the dead nodes only
    return _module_cluster


@pytest.fixture(scope="session")
def tansu_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TansuBroker]:
    """One tansu broker (a second Kafka-protocol implementation) for the pytest process."""
    broker = brokers.start_tansu(tmp_path_factory.mktemp("tansu"))
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """A ``local[2]`` loopback session, UI off, 2 shuffle partitions, ``sampan`` registered;
    one for every Spark test of the run (starting one costs seconds)."""
    from framework.spark import local_session

    session = local_session("local[2]", app="sampan-tests", options={
        # The tests' queries are small and many: the C1 compiler alone and one GC thread
        # halved the driver JVM's CPU time on the ad-join verifier test (41 s against 90 s).
        "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"})
    session.conf.set("spark.sql.shuffle.partitions", "2")
    try:
        yield session
    finally:
        session.stop()
