"""Apache Kafka as production runs it, on 127.0.0.1: TLS, SASL, client certificates, ACLs.

`start_secured_kafka` starts one KRaft node with two client listeners:

- ``SASL_SSL`` (`SecuredKafka.bootstrap`): TLS with a broker certificate from a CA made for
  the run, and SASL PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER (Kafka's unsecured
  JWT validator: a token's ``sub`` is its principal). SCRAM users are created when the
  storage is formatted (KIP-900), as a fresh cluster's are.
- ``SSL`` with client certificates required (`SecuredKafka.mtls_bootstrap`): the principal
  is the certificate's common name.

``StandardAuthorizer`` with ``allow.everyone.if.no.acl.found=false``: a principal may do
only what an ACL allows. ``admin`` is a super user; the job's principal ``alice`` starts
with no ACL at all (`grant` / `revoke` change that). Passwords are random per broker.
"""

from __future__ import annotations

import asyncio
import base64
import json
import secrets
import shutil
import tempfile
import time
from collections.abc import Coroutine, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka_broker import KafkaCluster, KafkaNode, start_kafka
from tls_certs import CertificateAuthority, Issued

__all__ = ["JOB_USER", "Acl", "SecuredKafka", "start_secured_kafka", "unsecured_jwt"]

JOB_USER = "alice"
"""The job's principal (``User:alice``) whichever way it authenticates."""
ADMIN = "admin"

RESOURCE_TYPES = {"TOPIC": 2, "GROUP": 3, "CLUSTER": 4, "TRANSACTIONAL_ID": 5}
PATTERN_TYPES = {"LITERAL": 3, "PREFIXED": 4}
OPERATIONS = {"ALL": 2, "READ": 3, "WRITE": 4, "CREATE": 5, "DELETE": 6, "ALTER": 7,
              "DESCRIBE": 8, "CLUSTER_ACTION": 9, "DESCRIBE_CONFIGS": 10, "ALTER_CONFIGS": 11,
              "IDEMPOTENT_WRITE": 12}
ALLOW = 3


@dataclass(frozen=True)
class Acl:
    """One ACL binding: ``principal`` may do ``operation`` on the resource (any host)."""

    resource_type: str
    pattern_type: str
    name: str
    operation: str
    principal: str = f"User:{JOB_USER}"

    def fields(self) -> tuple[int, str, int, str, str, int, int]:
        return (RESOURCE_TYPES[self.resource_type], self.name,
                PATTERN_TYPES[self.pattern_type], self.principal, "*",
                OPERATIONS[self.operation], ALLOW)


def unsecured_jwt(subject: str, lifetime_s: int = 3600) -> str:
    """An unsigned JWT (``alg: none``) that Kafka's default OAUTHBEARER validator accepts."""
    def part(document: Mapping[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(document).encode()).decode().rstrip("=")

    now = int(time.time())
    return (f"{part({'alg': 'none'})}."
            f"{part({'sub': subject, 'iat': now, 'exp': now + lifetime_s})}.")


@dataclass
class _Listeners:
    """`kafka_broker.NodeSecurity` of the secured node."""

    folder: Path
    passwords: dict[str, str]
    ca: CertificateAuthority = field(init=False)
    broker: Issued = field(init=False)

    def __post_init__(self) -> None:
        self.ca = CertificateAuthority(self.folder / "ca")
        self.broker = self.ca.issue("kafka-broker", server=True)

    def node_settings(self, node: KafkaNode) -> dict[str, str]:
        scram = "org.apache.kafka.common.security.scram.ScramLoginModule required"
        plain_users = " ".join(f'user_{user}="{password}"'
                               for user, password in sorted(self.passwords.items()))
        return {
            "listeners": f"SASL_SSL://127.0.0.1:{node.port},SSL://127.0.0.1:{node.tls_port},"
                         f"CONTROLLER://127.0.0.1:{node.controller_port}",
            "advertised.listeners": f"SASL_SSL://127.0.0.1:{node.port},"
                                    f"SSL://127.0.0.1:{node.tls_port}",
            "listener.security.protocol.map": "SASL_SSL:SASL_SSL,SSL:SSL,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "SASL_SSL",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config":
                f'{scram} username="{ADMIN}" password="{self.passwords[ADMIN]}";',
            "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": f"{scram};",
            "listener.name.sasl_ssl.plain.sasl.jaas.config":
                "org.apache.kafka.common.security.plain.PlainLoginModule required "
                f"{plain_users};",
            "listener.name.sasl_ssl.oauthbearer.sasl.jaas.config":
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                f'unsecuredLoginStringClaim_sub="{ADMIN}";',
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self.broker.both),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca.cert),
            "listener.name.ssl.ssl.client.auth": "required",
            "ssl.principal.mapping.rules": "RULE:^CN=([A-Za-z0-9._-]+)$/$1/,DEFAULT",
            "authorizer.class.name":
                "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "allow.everyone.if.no.acl.found": "false",
            # ANONYMOUS: the node itself on its PLAINTEXT controller listener (not advertised).
            "super.users": f"User:{ADMIN};User:ANONYMOUS",
        }

    def format_args(self) -> list[str]:
        args = []
        for user, password in sorted(self.passwords.items()):
            for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
                args += ["--add-scram", f"{mechanism}=[name={user},password={password}]"]
        return args

    def client_kwargs(self) -> dict[str, Any]:
        from aiokafka.helpers import create_ssl_context

        return {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
                "sasl_plain_username": ADMIN, "sasl_plain_password": self.passwords[ADMIN],
                "ssl_context": create_ssl_context(cafile=str(self.ca.cert))}


@dataclass
class SecuredKafka:
    """A running secured node and what a client needs to reach it."""

    cluster: KafkaCluster
    listeners: _Listeners
    folder: Path | None = None
    """Removed by `stop` (the certificates' folder of a broker started without one)."""

    @property
    def bootstrap(self) -> str:
        """The SASL_SSL listener."""
        return self.cluster.bootstrap

    @property
    def mtls_bootstrap(self) -> str:
        """The mutual-TLS listener."""
        return f"127.0.0.1:{self.cluster.nodes[0].tls_port}"

    @property
    def ca_file(self) -> Path:
        return self.listeners.ca.cert

    @property
    def ca(self) -> CertificateAuthority:
        return self.listeners.ca

    def password(self, user: str = JOB_USER) -> str:
        return self.listeners.passwords[user]

    def admin_options(self) -> dict[str, Any]:
        """sampan ``client_options`` of the super user (SCRAM-SHA-512)."""
        return {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
                "sasl_plain_username": ADMIN, "sasl_plain_password": self.password(ADMIN),
                "ssl_cafile": str(self.ca_file)}

    def stop(self) -> None:
        self.cluster.stop()
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)

    # -- ACLs -------------------------------------------------------------------------

    def grant(self, acls: Iterable[Acl]) -> None:
        _run(self._change(list(acls), create=True))

    def revoke(self, acls: Iterable[Acl]) -> None:
        _run(self._change(list(acls), create=False))

    @contextmanager
    def granted(self, acls: Iterable[Acl]) -> Iterator[None]:
        """``acls`` for the length of a ``with`` block."""
        given = list(acls)
        self.grant(given)
        try:
            yield
        finally:
            self.revoke(given)

    async def _change(self, acls: list[Acl], *, create: bool) -> None:
        from aiokafka.admin import AIOKafkaAdminClient
        from aiokafka.protocol.admin import CreateAclsRequest, DeleteAclsRequest

        if not acls:
            return
        admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap,
                                    **self.listeners.client_kwargs())
        await admin.start()
        try:
            for acl in acls:
                if create:
                    answer = await admin._send_request(CreateAclsRequest(*acl.fields()))
                    errors = [e for e in answer.creation_responses if e[0]]
                else:
                    answer = await admin._send_request(DeleteAclsRequest(*acl.fields()))
                    errors = [e[:2] for e in answer.filter_responses if e[0]]
                assert not errors, f"{'creating' if create else 'deleting'} {acl}: {errors}"
        finally:
            await admin.close()
        await asyncio.sleep(0.2)  # the authorizer applies metadata records asynchronously


def _run(work: Coroutine[Any, Any, None]) -> None:
    """Run ``work`` to its end, also from inside a running event loop (an async test):
    then on a thread of its own."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(work)
        return
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, work).result()


def start_secured_kafka(folder: Path | None = None) -> SecuredKafka:
    """A secured one-node Apache Kafka (see the module docstring); ``stop`` it when done."""
    root = Path(tempfile.mkdtemp(prefix="sampan-secured-")) if folder is None else folder
    passwords = {ADMIN: secrets.token_hex(12), JOB_USER: secrets.token_hex(12)}
    listeners = _Listeners(root / "tls", passwords)
    try:
        cluster = start_kafka(root / "broker", security=listeners)
    except BaseException:
        if folder is None:
            shutil.rmtree(root, ignore_errors=True)
        raise
    return SecuredKafka(cluster, listeners, root if folder is None else None)
