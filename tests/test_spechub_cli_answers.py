"""Every `spechub` subcommand against a stand-in server that answers well, then wrongly (issue 52 §5, defects 6 and 7).

The stand-in is a real HTTP server on loopback (tests/support/scripted_server.py). A well-formed answer of the wrong
shape is an error naming the field and the server, exit 2, never a traceback; bad local input says what is wrong
with the file; an answer past the size cap is refused (--max-answer-mb raises it); `gate` passes only on
`compatible: true`; and `verify` pins no key for a certificate that names no issuer (§6).
"""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from kernel import certificates
from spechub import cli
from tests.support.scripted_server import Answer, answer, scripted

T = "2026-12-05T00:00:00Z"
ISSUER = "https://spechub.example"
KEY = certificates.private_key_from_seed(certificates.new_seed())
SPEED = {"concurrency": 1, "speedup": 1.6, "interval": [1.5, 1.7], "supports": "faster", "baseline_tokens_per_second": 100.0,
         "speculative_tokens_per_second": 160.0, "pairs": 6}  # fmt: skip
RUN: dict[str, Any] = {
    "id": 9, "pair": 5, "workload": None, "engine": "vllm", "engine_version": "0.32.0", "hardware": "cpu",
    "measured_on": {"kind": "hosted", "worker": None, "owner": None, "engine_build": None, "evidence": None},
    "trigger": "submission", "priority": 0, "dispatched_at": None, "state": "finished", "stage": "verdict", "progress": 100,
    "attempts": 1, "max_attempts": 3, "heartbeat_at": None, "error_code": "", "error_message": "", "created_at": T,
    "started_at": T, "finished_at": T,
    "verdict": {"verdict": "certified", "reasons": [], "qualification": None,
                "properties": {"speed": {"outcome": "pass", "fault": None, "reason": "faster", "evidence": {}}}},
    "acceptance": None, "speed": [SPEED], "best_k": [], "schedule": None, "latency": [], "measurement": None, "smoke": None,
    "results": [],
}  # fmt: skip
GATE = {"compatible": True, "vllm_version": "0.32.0", "method": "draft_model", "num_speculative_tokens": 4, "format": {},
        "recipe": None, "findings": [{"rule": "tokenizer", "code": "gate:tokenizer-match", "severity": "info",
                                      "message": "The same tokenizer.", "hint": ""}]}  # fmt: skip
SUBMISSION = {"id": 3, "repo_id": "org/draft", "revision": "main", "verifier_repo_id": "org/verifier",
              "verifier_revision": "main", "status": "accepted", "refusal_code": "", "refusal_message": "",
              "validation_report": {}, "pair": 5, "run": 9, "created_at": T}  # fmt: skip
BEST = {"pair": 5, "draft": "org/draft", "method": "draft_model", "speedup": 1.6, "indicative": False, "verdict": "certified",
        "run": 9, "mean_acceptance_length": 3.2, "serve": "vllm serve org/verifier"}  # fmt: skip
RECOMMENDATIONS = {"query": {"verifier": "org/verifier", "hardware": "cpu", "concurrency": 1, "workload": ""},
                   "best": BEST, "ranked": [BEST]}  # fmt: skip
WORKLOAD = {"id": 4, "name": "ours", "verifier": "org/verifier", "verifier_sha": "a" * 40, "sha256": "b" * 64,
            "format": "jsonl", "total_requests": 12, "unique_requests": 12, "sampled": 12, "seed": 0, "size_bytes": 100,
            "categories": {}, "measured": "12 of your 12 requests, seed 0", "created_at": T, "deleted_at": None}  # fmt: skip
CANDIDATE: dict[str, Any] = {
    "pair": 5, "draft": "org/draft", "method": "draft_model", "run": 9, "acceptance": {"mean_acceptance_length": 3.2},
    "speed": [SPEED], "break_even": {"faster_up_to": 4, "slower_from": None}, "properties": [], "equivalent": True,
    "at_concurrency": {"concurrency": 1, "speedup": 1.6, "interval": [1.5, 1.7], "supports": "faster", "dof": 5},
    "public_suite": None, "serve": None,
}  # fmt: skip
REPORT = {"workload": WORKLOAD, "concurrency": 1, "hardware": "cpu", "measured_levels": [1], "candidates": [CANDIDATE],
          "running": [], "recommendation": {"pair": 5, "reason": "Serve org/draft."},
          "export": {"command": "spechub ..."}}  # fmt: skip
PUBLIC_KEY = {"algorithm": "ed25519", "key_id": certificates.key_id(KEY.public_key()), "issuer": ISSUER,
              "public_key_pem": certificates.public_key_pem(KEY.public_key())}  # fmt: skip
INGESTED = {"stored": 1, "skipped": 0, "state": "within", "reason": "Within the certified band.", "live_al": 3.1}
METRICS = "".join(f"# TYPE vllm:spec_decode_num_{name} counter\nvllm:spec_decode_num_{name}_total {count}\n"
                  for name, count in (("drafts", 10), ("draft_tokens", 40), ("accepted_tokens", 20)))  # fmt: skip
JUDGED = {"verdict": "within", "reason": "AL 3.40 [3.28, 3.52] over 2000 requests", "al": 3.4, "al_interval": [3.28, 3.52],
          "certified_al": 3.4, "band": [3.3, 3.5], "smallest_difference": 0.22, "drafts": 20000, "requests": 2000, "k": 1,
          "source": "/metrics exposition", "note": "", "held": {"pair": 5, "run": 9, "engine_version": "0.32.0",
                                                                 "hardware": "cpu", "temperature": 0.0},
          "positions": [{"position": 1, "rate": 0.8, "interval": [0.77, 0.83], "certified": 0.8,
                         "certified_interval": [0.78, 0.82], "verdict": "within", "smallest_difference": 0.05}]}  # fmt: skip

# What each subcommand asks, and the answer a SpecHub gives it.
SERVER: dict[tuple[str, str], object] = {
    ("POST", "/api/v1/compatibility/"): GATE,
    ("POST", "/api/v1/submissions/"): SUBMISSION,
    ("GET", "/api/v1/runs/9/"): RUN,
    ("GET", "/api/v1/runs/"): {"count": 1, "next": None, "previous": None, "results": [RUN]},
    ("GET", "/api/v1/recommendations/"): RECOMMENDATIONS,
    ("POST", "/api/v1/workloads/"): WORKLOAD,
    ("POST", "/api/v1/workloads/4/runs/"): [RUN],
    ("GET", "/api/v1/workloads/4/report/"): REPORT,
    ("GET", "/api/v1/certificates/public-key/"): PUBLIC_KEY,
    ("POST", "/api/v1/deployments/2/observations/"): INGESTED,
    ("POST", "/api/v1/judge/"): JUDGED,
}
COMMANDS = {
    "gate": ["gate", "--draft", "org/draft", "--verifier", "org/verifier"],
    "submit": ["submit", "--draft", "org/draft", "--verifier", "org/verifier", "--wait"],
    "runs": ["runs"],
    "recommend": ["recommend", "--verifier", "org/verifier"],
    "upload": ["upload", "{traffic}", "--verifier", "org/verifier"],
    "compare": ["compare", "4", "--certify", "5", "--wait"],
    "watch": ["watch", "--deployment", "2", "--once", "{metrics}", "--token", "ingest-secret"],
    "verify": ["verify", "{certificate}"],
    "judge": ["judge", "{metrics}", "--draft", "org/draft", "--verifier", "org/verifier"],
}


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home with no config and a token in the environment; the files the subcommands read."""
    for name in ("SPECHUB_URL", "SPECHUB_ALLOW_HTTP", "SPECHUB_INGEST_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SPECHUB_CONFIG", str(tmp_path / "config.toml"))
    monkeypatch.setenv("SPECHUB_TOKEN", "api-secret")
    (tmp_path / "traffic.jsonl").write_text('{"prompt": "Q: 1 + 1?\\nA:"}\n')
    (tmp_path / "metrics.txt").write_text(METRICS)
    certificate(tmp_path / "certificate.json", issuer=ISSUER)
    return tmp_path


def certificate(path: Path, *, issuer: str | None) -> Path:
    payload = {"format": certificates.FORMAT, "verdict": "provisional", "expires_at": "2999-01-01T00:00:00+00:00",
               "issued_at": "2026-12-01T00:00:00+00:00", "reproduce": "",
               "inputs": {"draft": None, "method": "ngram", "verifier": {"repo_id": "org/v", "sha": "a" * 40},
                          "num_speculative_tokens": 4, "hardware": "cpu"}}  # fmt: skip
    if issuer is not None:
        payload["issuer"] = issuer
    path.write_bytes(certificates.sign(payload, KEY))  # type: ignore[arg-type]
    return path


def served(changes: dict[tuple[str, str], object | Answer] | None = None) -> dict[tuple[str, str], Answer | list[Answer]]:
    given = {**SERVER, **(changes or {})}
    return {route: found if isinstance(found, Answer) else answer(found) for route, found in given.items()}


def spechub(command: str, base: str, here: Path, *extra: str) -> list[str]:
    files = {"traffic": here / "traffic.jsonl", "metrics": here / "metrics.txt", "certificate": here / "certificate.json"}
    return [word.format(**files) for word in COMMANDS[command]] + ["--url", base, *extra]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_subcommand_reads_a_spechubs_answers(command, here, capsys):
    with scripted(served()) as (base, _):
        code = cli.main(spechub(command, base, here))
    said = capsys.readouterr()
    assert code == 0, said


def edited(route: tuple[str, str], edit: str, value: object) -> dict[tuple[str, str], object]:
    """SERVER's answer on `route` with the field at the dotted path `edit` set to `value` (or removed: ...)."""
    found: Any = copy.deepcopy(SERVER[route])
    *parents, last = edit.split(".")
    node = found
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    if value is ...:
        del node[last]
    else:
        node[int(last) if isinstance(node, list) else last] = value
    return {route: found}


# Each subcommand given a well-formed answer of the wrong shape, and the field the error must name.
WRONG = [
    ("gate", {("POST", "/api/v1/compatibility/"): {}}, "compatible: expected true or false, got nothing"),
    ("gate", edited(("POST", "/api/v1/compatibility/"), "compatible", "no"), "compatible: expected true or false"),
    ("gate", edited(("POST", "/api/v1/compatibility/"), "findings.0.severity", None), "findings[0].severity"),
    ("submit", edited(("GET", "/api/v1/runs/9/"), "state", ...),
     "GET /api/v1/runs/9/ in a shape this client does not read: state: expected a string, got nothing"),
    ("submit", edited(("GET", "/api/v1/runs/9/"), "verdict.properties.speed.outcome", 1), "verdict.properties.speed.outcome"),
    ("submit", edited(("POST", "/api/v1/submissions/"), "status", 5), "status: expected a string, got the number 5"),
    ("runs", edited(("GET", "/api/v1/runs/"), "results", [1]), "results[0]: expected a JSON object"),
    ("runs", {("GET", "/api/v1/runs/"): [1]}, "the answer: expected a JSON object, got a JSON list"),
    ("runs", edited(("GET", "/api/v1/runs/"), "results.0.pair", "5"), "results[0].pair: expected an integer"),
    ("recommend", edited(("GET", "/api/v1/recommendations/"), "best.speedup", "fast"), "best.speedup: expected a number"),
    ("upload", edited(("POST", "/api/v1/workloads/"), "measured", ...), "measured"),
    ("compare", edited(("GET", "/api/v1/workloads/4/report/"), "candidates.0.at_concurrency.speedup", "fast"),
     "candidates[0].at_concurrency.speedup: expected a number, got the string 'fast'"),
    ("compare", {("POST", "/api/v1/workloads/4/runs/"): [{"id": "9"}]}, "[0].id: expected an integer"),
    ("watch", edited(("POST", "/api/v1/deployments/2/observations/"), "state", None), "state: expected a string, got null"),
    ("verify", edited(("GET", "/api/v1/certificates/public-key/"), "public_key_pem", 5), "public_key_pem"),
    ("judge", edited(("POST", "/api/v1/judge/"), "positions.0.rate", "high"), "positions[0].rate: expected a number"),
]  # fmt: skip


@pytest.mark.parametrize(("command", "changes", "named"), WRONG)
def test_an_answer_of_the_wrong_shape_is_an_error_naming_the_field_and_the_server(command, changes, named, here, capsys):
    with scripted(served(changes)) as (base, _):
        code = cli.main(spechub(command, base, here))
    said = capsys.readouterr()
    assert code == 2 and "client:unexpected-answer" in said.err and base in said.err and named in said.err, said
    assert not said.out.startswith("compatible")


def test_reproduce_reads_the_servers_key_as_verify_does_and_runs_nothing_on_a_wrong_shape(here, capsys):
    out = here / "reproduced.json"
    with scripted(served(edited(("GET", "/api/v1/certificates/public-key/"), "issuer", 5))) as (base, _):
        code = cli.main(["reproduce", str(here / "certificate.json"), "--out", str(out), "--url", base])
    said = capsys.readouterr().err
    assert code == 2 and "issuer: expected a string, got the number 5" in said and base in said, said
    assert not out.exists()


def test_gate_passes_only_on_compatible_true(here, capsys):
    for compatible, expected in ((True, 0), (False, 1), ("no", 2), (1, 2), (None, 2)):
        with scripted(served(edited(("POST", "/api/v1/compatibility/"), "compatible", compatible))) as (base, _):
            assert cli.main(spechub("gate", base, here)) == expected, compatible
        assert capsys.readouterr().out.startswith("compatible") == (compatible is True)


def test_a_compare_row_with_no_interval_or_a_strange_acceptance_length_still_prints(here, capsys):
    row = {**CANDIDATE, "acceptance": {"mean_acceptance_length": "many"},
           "at_concurrency": {**CANDIDATE["at_concurrency"], "interval": []}}  # fmt: skip
    with scripted(served({("GET", "/api/v1/workloads/4/report/"): {**REPORT, "candidates": [row]}})) as (base, _):
        assert cli.main(["compare", "4", "--url", base]) == 0
    assert "AL -  speedup 1.60x (no interval)" in capsys.readouterr().out


@pytest.mark.parametrize("given", ["missing.jsonl", "."])
def test_upload_of_a_file_that_is_missing_or_a_directory_says_so(given, here, capsys):
    with scripted(served()) as (base, script):
        code = cli.main(["upload", str(here / given), "--verifier", "org/verifier", "--url", base])
    said = capsys.readouterr().err
    assert code == 1 and str(here / given).rstrip("/.") in said, said
    assert "No such file" in said or "Is a directory" in said
    assert script.seen == []


@pytest.mark.parametrize(("written", "said"), [("[" * 200_000 + "]" * 200_000, "nested too deeply"),
                                               ('{"https://x": 1}', "each an object"), ("{", "Expecting")])  # fmt: skip
def test_a_known_keys_file_spechub_cannot_read_says_what_is_wrong_with_it(written, said, here, capsys):
    known = here / "known_keys.json"
    known.write_text(written)
    known.chmod(0o600)
    with scripted(served()) as (base, _):
        code = cli.main(spechub("verify", base, here))
    err = capsys.readouterr().err
    assert code != 0 and str(known) in err and said in err and "remove the file" in err, err


def test_a_known_keys_path_that_is_a_directory_is_refused(here, capsys):
    (here / "known_keys.json").mkdir()
    with scripted(served()) as (base, _):
        assert cli.main(spechub("verify", base, here)) != 0
    assert "is not a file" in capsys.readouterr().err


def big_page(size: int) -> bytes:
    """A runs page padded with whitespace to `size` bytes: valid JSON, only too big."""
    page = json.dumps({"count": 0, "next": None, "previous": None, "results": []}).encode()
    return page[:-1] + b" " * (size - len(page)) + b"}"


def test_an_answer_past_the_size_cap_is_refused_and_the_flag_raises_the_cap(here, capsys):
    routes = {("GET", "/api/v1/runs/"): Answer(200, big_page(2 * 2**20))}
    with scripted(routes) as (base, _):
        refused = cli.main(["runs", "--url", base, "--max-answer-mb", "1"])
        said = capsys.readouterr().err
        assert refused == 2 and "client:answer-too-large" in said and "--max-answer-mb" in said, said
        assert cli.main(["runs", "--url", base, "--max-answer-mb", "3"]) == 0


def test_a_compressed_answer_is_capped_as_it_is_inflated(here, capsys):
    bomb = gzip.compress(big_page(16 * 2**20), compresslevel=1)  # 16 MiB of JSON in well under 1 MiB
    headers = (("Content-Type", "application/json"), ("Content-Encoding", "gzip"))
    with scripted({("GET", "/api/v1/runs/"): Answer(200, bomb, headers)}) as (base, _):
        code = cli.main(["runs", "--url", base, "--max-answer-mb", "1"])
    assert code == 2 and "more than 1 MiB" in capsys.readouterr().err


@pytest.mark.parametrize("offered", ["", "https://stranger.example"])
def test_verify_pins_no_key_for_a_certificate_that_names_no_issuer(offered, here, capsys):
    legacy = certificate(here / "legacy.json", issuer=None)
    with scripted(served(edited(("GET", "/api/v1/certificates/public-key/"), "issuer", offered))) as (base, _):
        code = cli.main(["verify", str(legacy), "--url", base])
    said = capsys.readouterr().err
    assert code == 1 and "names no issuer" in said and "--public-key" in said and "Nothing was pinned" in said, said
    assert not (here / "known_keys.json").exists()


def test_verify_pins_no_key_a_server_offers_with_no_issuer(here, capsys):
    with scripted(served(edited(("GET", "/api/v1/certificates/public-key/"), "issuer", ""))) as (base, _):
        code = cli.main(spechub("verify", base, here))
    said = capsys.readouterr().err
    assert code == 1 and "names no issuer for its key" in said and "--public-key" in said, said
    assert not (here / "known_keys.json").exists()


def test_a_certificate_that_names_no_issuer_still_verifies_with_the_issuers_key(here, capsys):
    (here / "issuer.pem").write_text(certificates.public_key_pem(KEY.public_key()))
    legacy = certificate(here / "legacy.json", issuer=None)
    assert cli.main(["verify", str(legacy), "--public-key", str(here / "issuer.pem")]) == 0
    assert "Signature valid" in capsys.readouterr().out


HOSTILE = "\x1b]0;owned\x07\x1b[2J gnp\u202e.exe\nspechub: all good"
ESCAPED = "\\x1b]0;owned\\x07\\x1b[2J gnp\\u202e.exe\\x0aspechub: all good"


def test_a_servers_error_message_shows_its_control_characters_as_escapes(here, capsys):
    refusal = answer({"error": {"code": "bad\x1b[31m", "message": HOSTILE}}, status=400)
    with scripted({("GET", "/api/v1/runs/"): refusal}) as (base, _):
        assert cli.main(["runs", "--url", base]) == 1
    err = capsys.readouterr().err
    assert f"spechub: bad\\x1b[31m: {ESCAPED}" in err and not {"\x1b", "\x07", "\u202e"} & set(err), err


def test_a_gate_finding_from_the_server_shows_its_control_characters_as_escapes(here, capsys):
    with scripted(served(edited(("POST", "/api/v1/compatibility/"), "findings.0.message", HOSTILE))) as (base, _):
        assert cli.main(spechub("gate", base, here)) == 0
    out = capsys.readouterr().out
    assert ESCAPED in out and out.count("\n") == 2 and not {"\x1b", "\x07", "\u202e"} & set(out), out
