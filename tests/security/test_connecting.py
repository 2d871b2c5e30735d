"""Connecting to the secured broker: every way a client proves who it is works (SCRAM-SHA-256
and -512, PLAIN, OAUTHBEARER, a client certificate), and every way it can be wrong ends at
once with one line that says what happened — never a wait, a retry loop or a traceback —
and never shows the secret."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from jobs import harness as h
from jobs import jobfiles as jf
from kafka_broker import free_port
from secured_jobs import PASSWORD_ENV, inline, job_options
from secured_kafka import Acl, SecuredKafka, unsecured_jwt
from tls_certs import CertificateAuthority

from framework.systems.base import ProducerRecord
from framework.systems.kafka.system import KafkaSystem

CLI = [sys.executable, "-m", "framework.cli"]
BOUND_S = 60.0
"""Far above what a refusal takes (a second or two): only a wait or a retry loop reaches it."""


def _topic_acls(topic: str) -> list[Acl]:
    return [Acl("TOPIC", "LITERAL", topic, op) for op in ("CREATE", "READ", "WRITE")]


async def _round_trip(system: KafkaSystem, stream: str) -> list[bytes]:
    """Create ``stream``, write three records, read them back."""
    await system.create_stream(stream, 1)
    await system.produce([ProducerRecord(stream, b"k", f"v{i}".encode()) for i in range(3)])
    consumer = system.consumer()
    consumer.assign({next(iter(await _ssps(system, stream))): 0})
    got: list[bytes] = []
    deadline = time.monotonic() + BOUND_S
    while len(got) < 3 and time.monotonic() < deadline:
        for records in (await consumer.fetch(10, 200)).values():
            got += [r.value for r in records if r.value is not None]
    await consumer.close()
    return got


async def _ssps(system: KafkaSystem, stream: str) -> list[Any]:
    from groupers import SystemStreamPartition

    count = (await system.partition_counts([stream]))[stream]
    return [SystemStreamPartition(system.name, stream, p) for p in range(count)]


def _token_module(folder: Path) -> None:
    (folder / "tokens.py").write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r})\n"
        "from secured_kafka import unsecured_jwt\n\n"
        "async def token():\n"
        "    return unsecured_jwt('alice')\n")


@pytest.mark.parametrize("how", ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN", "OAUTHBEARER",
                                 "mutual TLS"])
async def test_each_way_of_authenticating_reads_and_writes_as_the_job_principal(
        secured_kafka: SecuredKafka, tmp_path: Path, how: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    namespace = f"conn-{uuid.uuid4().hex[:6]}."
    bootstrap = secured_kafka.bootstrap
    if how == "mutual TLS":
        client = secured_kafka.ca.issue("alice", password="key-secret")
        (tmp_path / "key-password").write_text("key-secret\n")
        options: dict[str, Any] = {
            "security_protocol": "SSL", "ssl_cafile": str(secured_kafka.ca_file),
            "ssl_certfile": str(client.cert), "ssl_keyfile": str(client.key),
            "ssl_key_password_file": "key-password"}
        bootstrap = secured_kafka.mtls_bootstrap
    elif how == "OAUTHBEARER":
        _token_module(tmp_path)
        options = {"security_protocol": "SASL_SSL", "sasl_mechanism": "OAUTHBEARER",
                   "sasl_oauth_token_provider": "tokens:token",
                   "ssl_cafile": str(secured_kafka.ca_file)}
    else:
        (tmp_path / "password").write_text(secured_kafka.password() + "\n")
        options = job_options(secured_kafka, namespace, sasl_mechanism=how,
                              sasl_plain_password=None, sasl_plain_password_file="password")
    options["namespace"] = namespace
    system = KafkaSystem("kafka", bootstrap, options, root=tmp_path)
    topic = f"{namespace}round-trip"
    with secured_kafka.granted(_topic_acls(topic)):
        try:
            assert await _round_trip(system, "round-trip") == [b"v0", b"v1", b"v2"]
        finally:
            await system.close()
    assert secured_kafka.password() not in repr(system.options)


def _job(folder: Path, bootstrap: str, **options: Any) -> Path:
    """The sum job's file with these ``client_options`` (nothing run)."""
    path = jf.write_job(folder, name=f"c{uuid.uuid4().hex[:6]}", system="kafka",
                       bootstrap=bootstrap)
    line = f'bootstrap = "{bootstrap}"\n'
    path.write_text(path.read_text().replace(
        line, f"{line}client_options = {{ {inline({'timeout_s': 5, **options})} }}\n"))
    return path


def _cli(*args: str, env: dict[str, str] | None = None) -> tuple[int, list[str]]:
    """Run `sampan ARGS`: exit status and stderr's lines; a command still running after
    `BOUND_S` waits or retries instead of stopping, and fails the test."""
    import os

    try:
        done = subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=BOUND_S,
                              cwd=h.REPO, env={**os.environ, **(env or {})})
    except subprocess.TimeoutExpired as hung:
        pytest.fail(f"`sampan {' '.join(args)}` still running after {BOUND_S:g} s: it waits "
                    f"or retries instead of stopping\n{hung.stderr!r}", pytrace=False)
    return done.returncode, done.stderr.strip().splitlines()


def _sasl(broker: SecuredKafka, **changes: Any) -> dict[str, Any]:
    return {**job_options(broker, "n."), **changes}


@pytest.mark.parametrize(("case", "expected"), [
    ("wrong password", "authentication failed — the broker refused the credentials of "
                       "User:alice"),
    ("unknown user", "authentication failed — the broker refused the credentials of User:bob"),
    ("untrusted CA", "the broker's certificate is not trusted"),
    ("plaintext client on the TLS listener", "the listener uses TLS; set security_protocol "
                                             "= \"SASL_SSL\""),
    ("TLS without SASL on the SASL listener", "the listener expects SASL"),
    ("SASL on the client-certificate listener", "the listener does not take SASL"),
    ("no client certificate", "the broker requires a client certificate"),
    ("an expired client certificate", "the broker refused the client certificate: it expired "
                                      "on "),
    ("a client certificate of another CA", "is not signed by a CA the broker trusts"),
    ("nothing listening", "connection refused"),
])
def test_a_client_that_cannot_connect_gets_one_line_saying_why(
        secured_kafka: SecuredKafka, tmp_path: Path, case: str, expected: str) -> None:
    broker, bootstrap = secured_kafka, secured_kafka.bootstrap
    ca = str(broker.ca_file)
    other = CertificateAuthority(tmp_path / "other", "other CA")
    options: dict[str, Any]
    if case == "wrong password":
        options = _sasl(broker, sasl_plain_password="not-the-password")
    elif case == "unknown user":
        options = _sasl(broker, sasl_plain_username="bob")
    elif case == "untrusted CA":
        options = _sasl(broker, ssl_cafile=str(other.cert))
    elif case == "plaintext client on the TLS listener":
        options = {"sasl_mechanism": "SCRAM-SHA-512", "security_protocol": "SASL_PLAINTEXT",
                   "sasl_plain_username": "alice", "sasl_plain_password": "x"}
    elif case == "TLS without SASL on the SASL listener":
        options = {"security_protocol": "SSL", "ssl_cafile": ca}
    elif case == "SASL on the client-certificate listener":
        client = broker.ca.issue("alice")
        options = _sasl(broker, ssl_certfile=str(client.cert), ssl_keyfile=str(client.key))
        bootstrap = broker.mtls_bootstrap
    else:
        bootstrap = broker.mtls_bootstrap
        options = {"security_protocol": "SSL", "ssl_cafile": ca}
        if case == "an expired client certificate":
            client = broker.ca.issue("alice", expired=True)
        elif case == "a client certificate of another CA":
            client = other.issue("alice")
        if case in ("an expired client certificate", "a client certificate of another CA"):
            options.update(ssl_certfile=str(client.cert), ssl_keyfile=str(client.key))
        if case == "nothing listening":
            bootstrap, options = f"127.0.0.1:{free_port()}", {}
    job = _job(tmp_path / "job", bootstrap, **options)
    status, lines = _cli("streams", "list", "--job", str(job),
                               env={PASSWORD_ENV: broker.password()})
    assert status == 2, lines
    assert expected in lines[-1], lines
    assert lines[-1].startswith("sampan streams: error: Kafka at 127.0.0.1:")
    assert not any("Traceback" in line for line in lines)
    assert broker.password() not in "\n".join(lines)
    assert "not-the-password" not in "\n".join(lines)


def test_sampan_run_with_a_wrong_password_stops_at_once_with_one_line(
        secured_kafka: SecuredKafka, tmp_path: Path) -> None:
    job = _job(tmp_path / "job", secured_kafka.bootstrap,
               **_sasl(secured_kafka, sasl_plain_password="${WRONG_PASSWORD}"))
    status, lines = _cli("run", str(job), env={"WRONG_PASSWORD": "wrong-one"})
    assert status == 2
    assert "authentication failed" in lines[-1]
    assert not any("wrong-one" in line for line in lines)


@pytest.mark.parametrize(("options", "expected"), [
    ({"security_protocol": "SASL_SSL", "sasl_mechanism": "GSSAPI"},
     "GSSAPI (Kerberos) is not supported by sampan"),
    ({"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
      "sasl_plain_username": "alice", "sasl_plain_password": "${SAMPAN_TEST_UNSET_VARIABLE}"},
     "refers to the environment variable SAMPAN_TEST_UNSET_VARIABLE, which is not set"),
    ({"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
      "sasl_plain_username": "alice"},
     "needs the password of user 'alice'"),
    ({"security_protocol": "SSL", "ssl_cafile": "no-such-ca.pem"},
     "ssl_cafile = 'no-such-ca.pem': no such file"),
    ({"security_protocol": "PLAINTEXT", "sasl_mechanism": "PLAIN"},
     "does not use SASL"),
    ({"security_protocol": "SASL_SSL", "sasl_mechanism": "OAUTHBEARER",
      "sasl_oauth_token_provider": "no_such_module:token"},
     "no_such_module.py next to the job file"),
])
def test_a_security_setting_that_cannot_work_is_refused_before_connecting(
        tmp_path: Path, options: dict[str, Any], expected: str) -> None:
    job = _job(tmp_path / "job", f"127.0.0.1:{free_port()}", **options)
    status, lines = _cli("run", str(job))
    assert status == 2
    assert expected in lines[-1], lines
    assert "[systems.kafka.client_options]" in lines[-1]
    assert len(lines) == 1, lines


def test_the_unsecured_token_helper_is_a_jwt_kafka_accepts() -> None:
    """(The OAUTHBEARER case above depends on it.)"""
    header, claims, signature = unsecured_jwt("alice").split(".")
    assert header and claims and signature == ""
