"""A kafka system's security options, read without a broker: references and files for
secrets, what each mechanism needs, TLS contexts, and secrets that never print, never
reach a stored configuration and never change a job's digest."""

from __future__ import annotations

import json
import ssl
import sys
from pathlib import Path
from typing import Any

import pytest

from framework.config import load_config
from framework.config.snapshot import load_snapshot, snapshot_config
from framework.errors import ConfigError
from framework.secrets import Secret, expand_references, references_only
from framework.systems.kafka.options import KafkaOptions

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tls_certs import CertificateAuthority

SCRAM = {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
         "sasl_plain_username": "alice"}


def _options(options: dict[str, Any], root: Path | None = None) -> KafkaOptions:
    return KafkaOptions.from_mapping("kafka", options, root)


def test_references_take_the_environment_and_an_escape_keeps_the_text() -> None:
    env = {"PASSWORD": "s3cret", "USER": "alice"}
    assert expand_references("${USER}:${PASSWORD}", "k", env) == "alice:s3cret"
    assert expand_references("$${USER} is literal", "k", env) == "${USER} is literal"
    assert expand_references("no reference", "k", env) == "no reference"
    with pytest.raises(ConfigError, match="refers to the environment variable MISSING"):
        expand_references("${MISSING}", "[systems.kafka.client_options] x", env)


def test_a_secret_prints_as_stars_and_compares_by_value() -> None:
    secret = Secret("s3cret")
    assert repr(secret) == str(secret) == f"{secret}" == "'***'"
    assert secret == Secret("s3cret") and secret != Secret("other")
    assert secret.reveal() == "s3cret"


def test_scram_takes_its_password_from_the_environment_or_a_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAMPAN_TEST_PW", "from-env")
    (tmp_path / "pw").write_text("from-file\n")
    by_env = _options({**SCRAM, "sasl_plain_password": "${SAMPAN_TEST_PW}"})
    by_file = _options({**SCRAM, "sasl_plain_password_file": "pw"}, tmp_path)
    for options, expected in ((by_env, "from-env"), (by_file, "from-file")):
        kwargs = options.client_kwargs("127.0.0.1:9093")
        assert kwargs["sasl_plain_password"] == expected
        assert kwargs["sasl_mechanism"] == "SCRAM-SHA-512"
        assert isinstance(kwargs["ssl_context"], ssl.SSLContext)
        assert expected not in repr(options)
    assert by_env.security.principal() == "User:alice"


@pytest.mark.parametrize(("options", "message"), [
    ({"security_protocol": "SASL_SSL", "sasl_mechanism": "GSSAPI"},
     "GSSAPI (Kerberos) is not supported by sampan"),
    ({"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-1"},
     "use one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER"),
    ({"security_protocol": "TLS"}, "use one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"),
    ({**SCRAM}, "needs the password of user 'alice'"),
    ({**SCRAM, "sasl_plain_password": "a", "sasl_plain_password_file": "pw"},
     "sets both sasl_plain_password and sasl_plain_password_file"),
    ({"security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN", "sasl_plain_password": "a"},
     "needs sasl_plain_username"),
    ({"security_protocol": "SSL", "sasl_mechanism": "PLAIN"}, "does not use SASL"),
    ({"security_protocol": "SASL_PLAINTEXT", "sasl_plain_username": "a",
      "sasl_plain_password": "b", "ssl_cafile": "ca.pem"}, "does not use TLS"),
    ({"security_protocol": "SASL_SSL", "sasl_mechanism": "OAUTHBEARER"},
     "needs exactly one of sasl_oauth_token_provider"),
    ({**SCRAM, "sasl_plain_password": "x", "sasl_oauth_token_file": "t"},
     "sasl_oauth_token_file is set but sasl_mechanism = 'SCRAM-SHA-512'"),
    ({"security_protocol": "SSL", "ssl_keyfile": "key.pem"}, "ssl_keyfile = 'key.pem': no such"),
    ({"security_protocol": "SSL", "ssl_check_hostname": "no"},
     "ssl_check_hostname must be true or false"),
    ({"sasl_plain_pasword": "x"}, "did you mean 'sasl_plain_password'?"),
])
def test_a_setting_that_cannot_work_names_the_key_and_the_fix(
        options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        _options(options)
    assert message in str(raised.value)
    assert str(raised.value).startswith("[systems.kafka.client_options]")


def test_a_client_certificate_with_an_encrypted_key_loads_and_a_wrong_password_is_named(
        tmp_path: Path) -> None:
    ca = CertificateAuthority(tmp_path / "ca")
    client = ca.issue("alice", password="key-pw")
    (tmp_path / "key-pw").write_text("key-pw")
    tls = {"security_protocol": "SSL", "ssl_cafile": str(ca.cert),
           "ssl_certfile": str(client.cert), "ssl_keyfile": str(client.key)}
    good = _options({**tls, "ssl_key_password_file": "key-pw"}, tmp_path)
    assert good.security.principal() == f"the principal of the client certificate {client.cert}"
    assert good.client_kwargs("h:1")["ssl_context"].check_hostname
    with pytest.raises(ConfigError, match="the client certificate and its key do not load") as e:
        _options({**tls, "ssl_key_password": "wrong-pw"})
    assert "wrong-pw" not in str(e.value)
    unchecked = _options({**tls, "ssl_key_password": "key-pw", "ssl_check_hostname": False})
    assert not unchecked.client_kwargs("h:1")["ssl_context"].check_hostname


async def test_a_token_provider_is_imported_from_the_job_folder(tmp_path: Path) -> None:
    (tmp_path / "my_tokens.py").write_text("def token():\n    return 'a.b.'\n")
    (tmp_path / "token.txt").write_text("c.d.\n")
    base = {"security_protocol": "SASL_SSL", "sasl_mechanism": "OAUTHBEARER"}
    by_function = _options({**base, "sasl_oauth_token_provider": "my_tokens:token"}, tmp_path)
    by_file = _options({**base, "sasl_oauth_token_file": "token.txt"}, tmp_path)
    assert await by_function.client_kwargs("h:1")["sasl_oauth_token_provider"].token() == "a.b."
    assert await by_file.client_kwargs("h:1")["sasl_oauth_token_provider"].token() == "c.d."


def test_a_written_secret_is_kept_out_of_the_stored_configuration_and_the_digest(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def job(password: str) -> Path:
        path = tmp_path / "job.toml"
        path.write_text(f"""\
[job]
name = "secret-job"
task = "t:T"
inputs = ["kafka.in"]

[systems.kafka]
type = "kafka"
bootstrap = "127.0.0.1:9093"
client_options = {{ security_protocol = "SASL_SSL", sasl_mechanism = "SCRAM-SHA-512", \
sasl_plain_username = "alice", sasl_plain_password = "{password}" }}

[streams."kafka.in"]
""")
        return path

    monkeypatch.setenv("SAMPAN_TEST_JOB_PW", "written-secret")
    written = load_config(job("written-secret"))
    referred = load_config(job("${SAMPAN_TEST_JOB_PW}"))
    other = load_config(job("another-secret"))
    assert written.digest == referred.digest == other.digest
    monkeypatch.delenv("SAMPAN_SECRET_KAFKA_SASL_PLAIN_PASSWORD", raising=False)
    path = snapshot_config(written)
    assert "written-secret" not in path.read_text()
    stored = json.loads(path.read_text())["systems"]["kafka"]["client_options"]
    assert stored["sasl_plain_password"] == "${SAMPAN_SECRET_KAFKA_SASL_PLAIN_PASSWORD}"
    reloaded = load_snapshot(path, written.path)
    assert reloaded.digest == written.digest
    options = KafkaOptions.from_mapping("kafka", reloaded.system("kafka").client_options)
    assert options.client_kwargs("h:1")["sasl_plain_password"] == "written-secret"


def test_a_single_reference_is_stored_as_it_is() -> None:
    kept, environment = references_only({"sasl_plain_password": "${PW}", "x": 1}, "P")
    assert (kept, environment) == ({"sasl_plain_password": "${PW}", "x": 1}, {})
