"""`spechub verify` and `spechub log watch` against SpecHub's own server (pytest-django's live_server) and its
transparency log: inclusion, consistency with the checkpoint this client kept, revocation, and a log tampered with."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.db import connection

from kernel import certificates
from registry.certificates.revocation import certificate_revoke
from registry.certificates.services import signing_key
from registry.models import Certificate
from spechub import cli
from tests.support.factories import PairFactory
from tests.support.runs import finish_run


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("SPECHUB_URL", "SPECHUB_TOKEN", "SPECHUB_ALLOW_HTTP"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SPECHUB_CONFIG", str(tmp_path / "config.toml"))
    return tmp_path


def saved(certificate: Certificate, path: Path) -> Path:
    path.write_bytes(certificate.document.encode())
    return path


@pytest.mark.django_db(transaction=True)
def test_verify_checks_inclusion_and_consistency_says_revoked_and_catches_a_log_tampered_with(
    config, live_server, settings, capsys
):
    url = settings.SPECHUB_PUBLIC_URL = live_server.url
    logged = [finish_run(PairFactory.create()).certificate for _ in range(3)]
    first, second, third = (saved(c, config / f"{n}.json") for n, c in enumerate(logged))

    assert cli.main(["verify", str(second), "--url", url]) == 0
    said = capsys.readouterr()
    assert "included at index 1 of a log of size 3; the first checkpoint you have seen" in said.out, said
    assert (config / "known_checkpoints.json").stat().st_mode & 0o077 == 0
    finish_run(PairFactory.create())
    assert cli.main(["verify", str(second), "--url", url]) == 0
    assert "included at index 1 of a log of size 4, consistent with the checkpoint you saw on 20" in capsys.readouterr().out
    assert cli.main(["log", "watch", "--url", url, "--count", "1"]) == 0
    assert "size 4, consistent with the checkpoint you saw on" in capsys.readouterr().out

    # Changed after logging, and signed again with the registry's own key: the signature holds, inclusion does not.
    payload = certificates.payload_of(first.read_bytes())
    payload["reasons"] = ["a better figure"]
    (config / "changed.json").write_bytes(certificates.sign(payload, signing_key()))
    assert cli.main(["verify", str(config / "changed.json"), "--url", url]) == 1
    assert "NOT IN THE LOG" in capsys.readouterr().err

    certificate_revoke(certificate_id=logged[1].pk, user=User.objects.create_user("staff", is_staff=True),
                       reason="the baseline server was misconfigured")  # fmt: skip
    assert cli.main(["verify", str(second), "--url", url]) == 1
    out = capsys.readouterr().out
    assert "REVOKED: revoked on" in out and "by staff: the baseline server was misconfigured" in out

    with connection.cursor() as cursor:  # the first certificate deleted, its entry with it, behind the registry's back
        cursor.execute("DELETE FROM registry_logentry WHERE certificate_id = %s", [logged[0].pk])
        cursor.execute("DELETE FROM registry_certificate WHERE id = %s", [logged[0].pk])
    finish_run(PairFactory.create())
    assert cli.main(["verify", str(third), "--url", url]) == 1
    err = capsys.readouterr().err
    assert "NOT VALID: the transparency log check failed: not consistent with the checkpoint you saw on" in err, err
    assert cli.main(["log", "watch", "--url", url, "--count", "1"]) == 1
    assert "LOG NOT CONSISTENT" in capsys.readouterr().err
