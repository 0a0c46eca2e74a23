"""The client keeps its token and trusts only keys it was given or pinned (issue 28, item 4).

The token's routing is watched by a recording HTTP server (a real one, on loopback, that answers
every request with an empty JSON list and keeps the Authorization header it saw); the key pinning
runs against SpecHub's own server (pytest-django's live_server).
"""

from __future__ import annotations

import base64
import contextlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from kernel import certificates
from spechub import cli
from spechub.client import Client, SpecHubError


class Recorder(BaseHTTPRequestHandler):
    seen: list[str | None]

    def do_GET(self) -> None:
        type(self).seen.append(self.headers.get("Authorization"))
        # A runs page and a recommendation at once: every answer the client reads is held to its shape.
        query = {"verifier": "org/v", "hardware": "cpu", "concurrency": 1, "workload": ""}
        body = json.dumps({"count": 0, "next": None, "previous": None, "results": [], "query": query, "best": None,
                           "ranked": []}).encode()  # fmt: skip
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def recorder() -> Iterator[tuple[str, list[str | None]]]:
    seen: list[str | None] = []
    handler = type("Seen", (Recorder,), {"seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", seen
    finally:
        server.shutdown()


@pytest.fixture
def recording() -> Iterator[tuple[str, list[str | None]]]:
    with recorder() as found:
        yield found


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("SPECHUB_URL", "SPECHUB_TOKEN", "SPECHUB_ALLOW_HTTP"):
        monkeypatch.delenv(name, raising=False)
    path = tmp_path / "config.toml"
    monkeypatch.setenv("SPECHUB_CONFIG", str(path))
    return path


TOKEN = "my-secret-token"


def configured(path: Path, url: str, mode: int = 0o600) -> None:
    path.write_text(f'url = "{url}"\ntoken = "{TOKEN}"\n')
    path.chmod(mode)


def test_the_token_goes_only_to_the_configured_server_and_only_where_a_sign_in_is_needed_with_a_recording_server(
    config, recording
):
    home, seen = recording
    configured(config, home)
    client = Client.from_environment()
    client.recommend(verifier="org/v")  # anonymous: no token on the wire
    client.runs()  # a user's runs: the token
    assert seen == [None, "Token my-secret-token"]
    with recorder() as (other, elsewhere):
        Client.from_environment(url=other).runs()
        assert elsewhere == [None], "the configured server's token went to another --url"


def test_plain_http_to_another_machine_is_refused_unless_allowed(config, monkeypatch):
    with pytest.raises(SpecHubError) as refused:
        Client.from_environment(url="http://203.0.113.5:8000")
    assert refused.value.code == "client:plain-http" and "https://" in refused.value.message
    assert Client.from_environment(url="http://203.0.113.5:8000", allow_http=True).base_url == "http://203.0.113.5:8000"
    monkeypatch.setenv("SPECHUB_ALLOW_HTTP", "1")
    assert Client.from_environment(url="http://203.0.113.5:8000").base_url.startswith("http://")
    assert Client.from_environment(url="http://localhost:8000").base_url == "http://localhost:8000"


@pytest.mark.parametrize(("mode", "said"), [(0o666, "writable by others"), (0o644, "others may read it")])
def test_a_config_others_may_change_or_read_the_token_of_is_refused_as_ssh_would(config, mode, said):
    configured(config, "https://spechub.example", mode=mode)
    with pytest.raises(SpecHubError) as refused:
        Client.from_environment()
    assert refused.value.code == "client:config-unsafe" and said in refused.value.message and "chmod 600" in refused.value.message


def signed(payload_issuer: str, key: object, tmp_path: Path, name: str) -> Path:
    payload = {"format": certificates.FORMAT, "verdict": "provisional", "expires_at": "2999-01-01T00:00:00+00:00",
               "issued_at": "2026-12-01T00:00:00+00:00", "issuer": payload_issuer, "reproduce": "",
               "inputs": {"draft": None, "method": "ngram", "verifier": {"repo_id": "org/v", "sha": "a" * 40},
                          "num_speculative_tokens": 4, "hardware": "cpu"}}  # fmt: skip
    path = tmp_path / name
    path.write_bytes(certificates.sign(payload, key))  # type: ignore[arg-type]
    return path


@pytest.mark.django_db(transaction=True)
def test_verify_pins_the_servers_key_on_first_use_and_then_refuses_a_strangers_key_and_issuer(
    config, live_server, settings, tmp_path, capsys
):
    issuer = settings.SPECHUB_PUBLIC_URL = live_server.url
    ours, stranger = (
        certificates.private_key_from_seed(certificates.new_seed()),
        certificates.private_key_from_seed(certificates.new_seed()),
    )
    settings.SPECHUB_SIGNING_KEY, settings.SPECHUB_SIGNING_PUBLIC_KEY = "", certificates.public_key_text(ours.public_key())
    good = signed(issuer, ours, tmp_path, "good.json")
    assert cli.main(["verify", str(good), "--url", live_server.url]) == 0
    said = capsys.readouterr()
    assert "Signature valid" in said.out and "on first use" in said.err
    pinned = json.loads((tmp_path / "known_keys.json").read_text())[live_server.url]
    assert pinned["issuer"] == issuer and (tmp_path / "known_keys.json").stat().st_mode & 0o077 == 0

    # The server now offers a stranger's key: the pinned one still decides, and the stranger's certificate fails.
    settings.SPECHUB_SIGNING_PUBLIC_KEY = certificates.public_key_text(stranger.public_key())
    assert cli.main(["verify", str(signed(issuer, stranger, tmp_path, "strange.json")), "--url", live_server.url]) == 1
    assert "NOT VALID" in capsys.readouterr().err
    # Our key, but a certificate naming another issuer: refused too.
    assert (
        cli.main(["verify", str(signed("https://elsewhere.example", ours, tmp_path, "other.json")), "--url", live_server.url])
        == 1
    )
    assert "names issuer 'https://elsewhere.example'" in capsys.readouterr().err
    assert cli.main(["verify", str(good), "--url", live_server.url]) == 0


def test_reproduce_verifies_before_it_runs_anything(config, tmp_path, capsys):
    ours, stranger = (certificates.private_key_from_seed(certificates.new_seed()) for _ in range(2))
    (tmp_path / "ours.pem").write_text(certificates.public_key_pem(ours.public_key()))
    forged = signed("https://spechub.example", stranger, tmp_path, "forged.json")
    out = tmp_path / "reproduced.json"
    assert cli.main(["reproduce", str(forged), "--public-key", str(tmp_path / "ours.pem"), "--out", str(out)]) == 1
    assert "NOT VALID" in capsys.readouterr().err and not out.exists()


def test_a_signed_payload_with_a_key_twice_is_refused():
    key = certificates.private_key_from_seed(certificates.new_seed())
    envelope = json.loads(certificates.sign({"format": certificates.FORMAT, "verdict": "failed"}, key))  # type: ignore[typeddict-item]
    body = b'{"format": "%s", "verdict": "failed", "verdict": "certified"}' % certificates.FORMAT.encode()
    signature = base64.b64encode(key.sign(certificates.pae(certificates.PAYLOAD_TYPE, body))).decode()
    envelope.update(payload=base64.b64encode(body).decode(), signatures=[{"keyid": envelope["signatures"][0]["keyid"],
                                                                          "sig": signature}])  # fmt: skip
    data = certificates.canonical(envelope) + b"\n"
    with pytest.raises(certificates.CertificateInvalid, match="'verdict' appears more than once"):
        certificates.verify(data, key.public_key())
