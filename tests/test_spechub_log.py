"""`spechub verify` and `spechub log watch` against SpecHub's own server (pytest-django's live_server) and its
transparency log: inclusion, consistency with the checkpoint this client kept, revocation, and a log tampered with.
Issue 61: a registry that hides a revocation from its answers, shows other entries or wipes its log is caught by a
client that watched it; a reason prints escaped; and `log watch` refuses bad arguments and damaged local files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.db import connection

from kernel import certificates
from kernel.transparency import entries
from registry.certificates import revocation
from registry.certificates.revocation import certificate_revoke
from registry.certificates.services import certificate_issue, signing_key, verifying_key
from registry.models import Certificate, LogEntry, LogHead
from registry.transparency import api as transparency_api
from registry.transparency.selectors import entry_proof, log_entries
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


@pytest.fixture
def staff() -> User:
    return User.objects.create_user("staff", is_staff=True)


@pytest.mark.django_db(transaction=True)
def test_a_registry_that_leaves_a_revocation_out_of_its_answers_is_caught_once_log_watch_read_its_log(
    config, live_server, settings, staff, monkeypatch, capsys
):
    url = settings.SPECHUB_PUBLIC_URL = live_server.url
    certificate = finish_run(PairFactory.create()).certificate
    older = saved(certificate, config / "older.json")
    settings.SPECHUB_CERTIFICATE_DAYS += 1  # so the new file differs within the same second
    certificate_issue(run=certificate.run)  # judged again: a second file; the first stays in the log
    certificate.refresh_from_db()
    newer = saved(certificate, config / "newer.json")
    for _ in range(3):
        finish_run(PairFactory.create())
    assert cli.main(["verify", str(newer), "--url", url]) == 0  # pins the key and keeps a checkpoint
    certificate_revoke(certificate_id=certificate.pk, user=staff, reason="the baseline server was misconfigured")
    # The registry's inclusion answer now says "revocation": null, though its log holds the revocation.
    monkeypatch.setattr(transparency_api, "entry_proof", lambda **asked: {**entry_proof(**asked), "revocation": None})
    assert cli.main(["verify", str(older), "--url", url]) == 0  # its answer alone cannot tell
    capsys.readouterr()

    monkeypatch.setattr(entries, "MAX_ENTRIES", 2)  # read in pages, as a long log is
    assert cli.main(["log", "watch", "--url", url, "--count", "1"]) == 0
    out = capsys.readouterr().out
    assert "read entries 0 to 5, 1 revocation(s) of 2 certificate file(s)" in out, out
    for revoked in (older, newer):
        assert cli.main(["verify", str(revoked), "--url", url]) == 1
        out = capsys.readouterr().out
        assert "REVOKED: revoked on" in out and "by staff: the baseline server was misconfigured" in out, out
        assert "answer left this revocation out, but its log holds it, at index 5" in out and "the server hid it" in out
    assert cli.main(["log", "watch", "--url", url, "--count", "1"]) == 0  # nothing new: nothing read again
    assert "no new entries" in capsys.readouterr().out
    # Offline, with the key alone and no server to ask, the revocation kept for the file's issuer still says so.
    (config / "issuer.pem").write_text(certificates.public_key_pem(verifying_key()))
    assert cli.main(["verify", str(older), "--public-key", str(config / "issuer.pem")]) == 1
    out = capsys.readouterr().out
    assert "REVOKED: revoked on" in out and f"read it from {url}'s log" in out, out


@pytest.mark.django_db(transaction=True)
def test_log_watch_refuses_entries_other_than_those_the_checkpoint_signs_and_keeps_nothing_of_them(
    config, live_server, settings, monkeypatch, capsys
):
    url = settings.SPECHUB_PUBLIC_URL = live_server.url
    logged = [finish_run(PairFactory.create()).certificate for _ in range(3)]
    assert cli.main(["verify", str(saved(logged[0], config / "0.json")), "--url", url]) == 0

    def swapped(**asked: int) -> list[entries.LoggedEntry]:  # the second entry shown as the first again
        found = log_entries(**asked)
        return [found[0], {**found[0], "index": 1}, *found[2:]] if asked["start"] == 0 else found

    monkeypatch.setattr(transparency_api, "log_entries", swapped)
    assert cli.main(["log", "watch", "--url", url, "--count", "1"]) == 1
    err = capsys.readouterr().err
    assert "LOG NOT CONSISTENT" in err and "do not lead to the root its checkpoint signs" in err, err
    assert not (config / "known_revocations.json").exists()

    # A kept checkpoint changed on this machine is this machine's fault, and says so.
    kept = json.loads((config / "known_checkpoints.json").read_text())
    kept[url]["checkpoint"] = kept[url]["checkpoint"].replace("\n3\n", "\n2\n")
    (config / "known_checkpoints.json").write_text(json.dumps(kept))
    assert cli.main(["log", "watch", "--url", url, "--count", "1"]) != 0
    err = capsys.readouterr().err
    assert "known_checkpoints.json: the checkpoint kept for" in err and "This file on your machine" in err, err
    assert "the server is not at fault" in err and "Traceback" not in err


@pytest.mark.django_db(transaction=True)
def test_a_log_that_now_answers_empty_is_refused_by_a_client_that_kept_a_checkpoint_of_it(
    config, live_server, settings, monkeypatch, capsys
):
    url = settings.SPECHUB_PUBLIC_URL = live_server.url
    certificate = saved(finish_run(PairFactory.create()).certificate, config / "certificate.json")
    assert cli.main(["verify", str(certificate), "--url", url]) == 0
    LogEntry.objects.all().delete()  # wiped: every log answer is now a 404
    LogHead.objects.all().delete()
    assert cli.main(["verify", str(certificate), "--url", url]) == 1
    err = capsys.readouterr().err
    assert "LOG NOT CONSISTENT" in err and "answers that its transparency log is empty, but you kept a checkpoint" in err, err
    assert cli.main(["log", "watch", "--url", url, "--count", "1"]) == 1
    assert "wiped or replaced" in capsys.readouterr().err

    # A client that never saw the log cannot tell a new log from a wiped one: it says nothing was checked.
    monkeypatch.setenv("SPECHUB_CONFIG", str(config / "fresh" / "config.toml"))
    assert cli.main(["verify", str(certificate), "--url", url]) == 0
    assert "not checked against the transparency log" in capsys.readouterr().err


@pytest.mark.django_db(transaction=True)
def test_verify_shows_a_revocation_reason_with_its_control_characters_escaped(
    config, live_server, settings, staff, monkeypatch, capsys
):
    url = settings.SPECHUB_PUBLIC_URL = live_server.url
    certificate = finish_run(PairFactory.create()).certificate
    monkeypatch.setattr(revocation, "_reason_checked", lambda reason: reason)  # a registry that does not refuse them
    certificate_revoke(certificate_id=certificate.pk, user=staff, reason="\x1b[2J\x1b]0;owned\x07 gnp\u202e.exe\nVALID")
    assert cli.main(["verify", str(saved(certificate, config / "c.json")), "--url", url]) == 1
    out = capsys.readouterr().out
    assert "by staff: \\x1b[2J\\x1b]0;owned\\x07 gnp\\u202e.exe\\x0aVALID" in out, out
    assert not {"\x1b", "\x07", "\u202e"} & set(out)


@pytest.mark.parametrize("every", ["-1", "0", "nan", "inf", "1e400", "soon"])
def test_log_watch_refuses_an_every_that_is_not_a_finite_number_of_seconds_above_0(every, config, capsys):
    with pytest.raises(SystemExit) as refused:
        cli.main(["log", "watch", "--url", "http://127.0.0.1:9", f"--every={every}"])
    err = capsys.readouterr().err
    assert refused.value.code == 2 and "--every" in err and "Traceback" not in err, err


def test_log_watch_names_a_public_key_file_that_is_missing_or_not_pem(config, capsys):
    (config / "junk.pem").write_text("not a key\n")
    for given, said in ((config / "missing.pem", "No such file"), (config / "junk.pem", "Cannot read a PEM public key")):
        assert cli.main(["log", "watch", "--url", "http://127.0.0.1:9", "--public-key", str(given), "--count", "1"]) == 1
        err = capsys.readouterr().err
        assert str(given) in err and said in err and "--public-key" in err and "Traceback" not in err, err


@pytest.mark.parametrize(
    ("name", "written", "said"),
    [("known_checkpoints.json", {"checkpoint": "a note"}, "has no seen_at"),
     ("known_checkpoints.json", {"seen_at": "2026-12-01"}, "has no checkpoint"),
     ("known_revocations.json", {"size": 3, "frontier": [], "read_at": "", "revocations": {}}, "an entry is damaged"),
     ("known_revocations.json", {"size": 0}, "an entry is damaged")],
)  # fmt: skip
def test_a_damaged_local_file_is_named_as_this_machines_to_fix_before_the_server_is_asked(name, written, said, config, capsys):
    (config / name).write_text(json.dumps({"http://127.0.0.1:9": written}))
    (config / name).chmod(0o600)
    assert cli.main(["log", "watch", "--url", "http://127.0.0.1:9", "--count", "1"]) != 0
    err = capsys.readouterr().err
    assert str(config / name) in err and said in err and "on your machine" in err and "remove the file" in err, err
    assert "Traceback" not in err and "unreachable" not in err
