"""`sampan drill --system kafka --client-options FILE` on the secured broker: the drill's
principal holds exactly the ACLs docs/security.md gives a drill (everything under the
``drill-`` prefix: its namespaces), its password in a file next to the options file; the
drill is EXACT and deletes its topics."""

from __future__ import annotations

from pathlib import Path

import pytest
from drill_cli import run_cli_drill
from secured_kafka import Acl, SecuredKafka

DRILL_ACLS = [Acl(resource, "PREFIXED", "drill-", "ALL")
              for resource in ("TOPIC", "GROUP", "TRANSACTIONAL_ID")]


@pytest.mark.timeout(600)
def test_the_drill_runs_exact_on_a_secured_cluster(secured_kafka: SecuredKafka,
                                                   tmp_path: Path) -> None:
    (tmp_path / "password").write_text(secured_kafka.password() + "\n")
    options = tmp_path / "kafka.toml"
    options.write_text(f"""\
security_protocol = "SASL_SSL"
sasl_mechanism = "SCRAM-SHA-256"
sasl_plain_username = "alice"
sasl_plain_password_file = "password"
ssl_cafile = "{secured_kafka.ca_file}"
""")
    with secured_kafka.granted(DRILL_ACLS):
        text = run_cli_drill(tmp_path / "drill", "--system", "kafka", "--bootstrap",
                             secured_kafka.bootstrap, "--client-options", str(options),
                             "--records", "1500", "--rate", "1500", "--keys", "100",
                             "--steps", "4", timeout=480)
    assert "verdict: EXACT — all 100 keys" in text
    assert "expansion kafka.words 2→4" in text
    assert "topics deleted" in text
    assert secured_kafka.password() not in text
