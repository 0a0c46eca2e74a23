"""Issue 54 §2 and §3 through the registry: `spechub judge` and the judge endpoint and page hold a `vllm bench serve`
result to its pair's certified band; a certified level downloads as vLLM's own result file; and the format x engine
matrix is filled from the gate's tables and real outcomes (a format added to the gate's table gets its row)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.utils import timezone
from django.utils.html import escape
from rest_framework.throttling import ScopedRateThrottle

from kernel import vllm_results
from kernel.formats import rules, vllm_support
from registry.certificates.revocation import certificate_revoke
from registry.models import Certificate, CertificationRun, Pair
from registry.runs.qualifications import qualification_record
from registry.states import RunState
from spechub import cli
from tests.kernel.test_vllm_results import ABOVE, BELOW, WITHIN, bench_result, certified_document, vllm_result_fields
from tests.support.factories import PairFactory, RunFactory
from tests.support.qualification import record
from tests.support.runs import finish_run

VERIFIER, DRAFT = "toy-org/judged-verifier", "toy-org/judged-draft"


def certified_pair() -> Pair:
    """A pair certified at k = 4: AL 3.4 over [3.3, 3.5], and each position's rate with its interval, greedy."""
    pair = PairFactory.create(verifier__repo_id=VERIFIER, draft__repo_id=DRAFT)
    document = certified_document()
    greedy = {"temperature": 0.0, "mean_acceptance_length": 3.4, "mean_acceptance_length_interval": [3.3, 3.5],
              "per_position": [0.8, 0.65, 0.55, 0.4], "drafts": 600,
              "per_position_interval": [[0.78, 0.82], [0.62, 0.68], [0.52, 0.58], [0.37, 0.43]]}  # fmt: skip
    document["stages"]["speculative"]["acceptance"]["by_temperature"] = [greedy]
    RunFactory.create(pair=pair, state=RunState.FINISHED, finished_at=timezone.now(), result=document, engine_version="0.32.0")
    return pair


def upload(client: Client, document: object, **fields: Any) -> Any:
    data = json.dumps(document).encode() if not isinstance(document, bytes) else document
    sent = {"verifier": VERIFIER, "draft": DRAFT, **fields, "file": SimpleUploadedFile("result.json", data)}
    return client.post("/api/v1/judge/", sent)


@pytest.mark.django_db
def test_the_judge_endpoint_answers_within_below_and_above_and_refuses_a_file_without_spec_decode_fields():
    pair = certified_pair()
    client = Client()
    for counts, verdict in ((WITHIN, "within"), (BELOW, "below"), (ABOVE, "above")):
        answer = upload(client, bench_result(counts))
        assert answer.status_code == 200, answer.content
        body = answer.json()
        assert body["verdict"] == verdict and body["held"]["pair"] == pair.pk and body["band"] == [3.3, 3.5]
        assert body["positions"][0]["certified_interval"] == [0.78, 0.82]
        assert {row["verdict"] for row in body["positions"]} == {verdict}
    refused = upload(client, {"completed": 10, "output_throughput": 12.5})
    assert refused.status_code == 422 and refused.json()["error"]["code"] == "judge:no-spec-decode"
    hostile = upload(client, b'{"a":' * 5000 + b"1" + b"}" * 5000)
    assert hostile.status_code == 422 and hostile.json()["error"]["code"] == "judge:too-deep"
    unknown = upload(client, bench_result(WITHIN), verifier="toy-org/nobody")
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "judge:no-pair"
    sampled = upload(client, bench_result(WITHIN), temperature="0.7")
    assert sampled.status_code == 404 and "not 0.7" in sampled.json()["error"]["message"]
    assert upload(client, bench_result(WITHIN), temperature="nan").status_code == 400


@pytest.mark.django_db
def test_the_judge_reads_the_temperature_from_the_file_and_says_when_it_assumed_one():
    certified_pair()
    client = Client()
    assumed = upload(client, bench_result(WITHIN)).json()
    assert assumed["held"]["temperature"] == 0.0 and assumed["held"]["temperature_from"] == "assumed"
    assert "temperature 0 assumed" in assumed["note"] and "--metadata temperature=0" in assumed["note"]
    from_file = upload(client, {**bench_result(WITHIN), "temperature": "0"}).json()  # as --metadata temperature=0 writes it
    assert (from_file["held"]["temperature_from"], from_file["note"]) == ("the file", "")
    sampled = upload(client, {**bench_result(WITHIN), "temperature": "0.7"})
    assert sampled.status_code == 404 and "not 0.7" in sampled.json()["error"]["message"]
    given = upload(client, bench_result(WITHIN), temperature="0").json()
    assert given["held"]["temperature_from"] == "given" and "assumed" not in given["note"]
    conflict = upload(client, {**bench_result(WITHIN), "temperature": 1}, temperature="0")
    assert conflict.status_code == 422 and conflict.json()["error"]["code"] == "judge:temperature-conflict"


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("shape", "code"),
    [
        (b"{}\n" * (vllm_results.MAX_BYTES // 3 - 1), "judge:too-many-values"),
        (b"[" + b"[]," * (vllm_results.MAX_BYTES // 3 - 1) + b"[]]", "judge:too-many-values"),
        (b"vllm:x 1\n" * (vllm_results.MAX_BYTES // 9 - 1), "judge:too-large"),
        (b'{"a": [' + b"1," * (vllm_results.MAX_BYTES // 2 - 8) + b"1]}", "judge:no-spec-decode"),
    ],
)  # fmt: skip
def test_a_16_mib_hostile_file_is_refused_with_its_reason_by_the_endpoint_and_the_page(shape, code):
    certified_pair()
    refused = upload(Client(), shape)
    assert refused.status_code == 422 and refused.json()["error"]["code"] == code
    page = Client().post("/judge/", {"verifier": VERIFIER, "draft": DRAFT, "hardware": "cpu",
                                     "file": SimpleUploadedFile("r.json", shape)})  # fmt: skip
    assert page.status_code == 422


@pytest.mark.django_db
def test_the_judge_page_shows_the_answer_and_the_refusal():
    certified_pair()
    page = Client().post("/judge/", {"verifier": VERIFIER, "draft": DRAFT, "hardware": "cpu", "temperature": "0",
                                     "file": SimpleUploadedFile("r.json", json.dumps(bench_result(BELOW)).encode())})  # fmt: skip
    assert page.status_code == 200 and b"live-below" in page.content and b"#4" in page.content
    refused = Client().post("/judge/", {"verifier": VERIFIER, "draft": DRAFT, "hardware": "cpu",
                                        "file": SimpleUploadedFile("r.json", b'{"completed": 3}')})  # fmt: skip
    assert refused.status_code == 422 and b"no spec-decode fields" in refused.content


@pytest.mark.django_db
def test_a_revoked_certificates_band_holds_no_file():
    pair = certified_pair()
    run = CertificationRun.objects.get(pair=pair)
    Certificate.objects.create(pair=pair, run=run, verdict="certified", issued_at=timezone.now(), expires_at=timezone.now(),
                               revoked_at=timezone.now(), revocation_reason="withdrawn")  # fmt: skip
    answer = upload(Client(), bench_result(WITHIN))
    assert answer.status_code == 404 and answer.json()["error"]["code"] == "judge:not-certified", answer.content


@pytest.mark.django_db
def test_the_judge_page_takes_files_at_the_endpoints_rate(monkeypatch: pytest.MonkeyPatch):
    certified_pair()
    cache.clear()
    monkeypatch.setattr(ScopedRateThrottle, "THROTTLE_RATES", {"compatibility": "2/minute"})
    fields = {"verifier": VERIFIER, "draft": DRAFT, "hardware": "cpu", "temperature": "0"}
    client = Client()
    for _ in range(2):
        sent = {**fields, "file": SimpleUploadedFile("r.json", json.dumps(bench_result(WITHIN)).encode())}
        assert client.post("/judge/", sent).status_code == 200
    third = client.post("/judge/", {**fields, "file": SimpleUploadedFile("r.json", b"{}")})
    assert third.status_code == 429 and b"wait a minute" in third.content


@pytest.mark.django_db(transaction=True)
def test_spechub_judge_gives_the_three_answers_and_exits_non_zero_on_a_file_without_spec_decode_fields(
    live_server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    monkeypatch.setenv("SPECHUB_CONFIG", str(tmp_path / "config.toml"))
    certified_pair()
    said = {}
    for counts, name in ((WITHIN, "within"), (BELOW, "below"), (ABOVE, "above")):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(bench_result(counts)))
        status = cli.main(["judge", str(path), "--draft", DRAFT, "--verifier", VERIFIER, "--url", live_server.url])
        said[name] = (status, capsys.readouterr().out)
    assert {name: status for name, (status, _) in said.items()} == {"within": 0, "below": 3, "above": 3}
    assert all(out.startswith(f"{name}: AL ") and "position 4:" in out for name, (_, out) in said.items())
    empty = tmp_path / "plain.json"
    empty.write_text(json.dumps({"completed": 10, "output_throughput": 12.5}))
    assert cli.main(["judge", str(empty), "--verifier", VERIFIER, "--draft", DRAFT, "--url", live_server.url]) == 1
    assert "judge:no-spec-decode" in capsys.readouterr().err


@pytest.mark.django_db
def test_a_certified_level_downloads_in_vllms_own_field_names():
    pair = PairFactory.create()
    run = finish_run(pair)
    run.result = {**certified_document(), "spec": run.result["spec"]}  # type: ignore[index]
    run.save(update_fields=["result"])
    certificate = Certificate.objects.get(run=run)
    answer = Client().get(f"/api/v1/certificates/{certificate.pk}/levels/4/vllm-bench-serve.json")
    assert answer.status_code == 200 and "attachment" in answer["Content-Disposition"]
    written = json.loads(answer.content)
    keys, percentile = vllm_result_fields()
    assert [key for key in written if key not in keys and not percentile.fullmatch(key)] == []
    assert written["max_concurrency"] == 4 and written["model_id"] == pair.verifier.repo_id
    assert vllm_results.read(answer.content, name="level.json").counts.per_position == (480, 390, 330, 240)
    assert Client().get(f"/api/v1/certificates/{certificate.pk}/levels/8/vllm-bench-serve.json").status_code == 404
    link = f"/api/v1/certificates/{certificate.pk}/levels/4/vllm-bench-serve.json"
    assert link in Client().get(f"/pairs/{pair.pk}/").content.decode()


@pytest.mark.django_db
def test_a_revoked_certificates_level_is_gone_with_the_reason_not_downloaded_as_certified():
    run = finish_run(PairFactory.create())
    run.result = {**certified_document(), "spec": run.result["spec"]}  # type: ignore[index]
    run.save(update_fields=["result"])
    certificate = Certificate.objects.get(run=run)
    certificate_revoke(certificate_id=certificate.pk, user=User.objects.create_user("staff", is_staff=True),
                       reason="the draft's weights were swapped")  # fmt: skip
    answer = Client().get(f"/api/v1/certificates/{certificate.pk}/levels/4/vllm-bench-serve.json")
    assert answer.status_code == 410 and answer.json()["error"]["code"] == "revoked"
    assert "the draft's weights were swapped" in answer.json()["error"]["message"]


@pytest.mark.django_db
def test_the_format_matrix_fills_each_row_from_the_gate_and_the_builds_outcomes():
    certified = PairFactory.create(format_metadata={"kind": "causal_lm", "architectures": ["LlamaForCausalLM"]})
    finish_run(certified)
    qualification_record(document=dict(record()), rejudge=False)  # the small document would judge provisional
    failed = PairFactory.create(method="eagle", format_metadata={"kind": "eagle1", "architectures": ["LlamaForCausalLM"]})
    RunFactory.create(pair=failed, state=RunState.FAILED_USER, error_code="engine:refused-pair", engine_version="0.32.0",
                      finished_at=timezone.now())  # fmt: skip
    assert CertificationRun.objects.filter(engine_version="0.32.0").count() == 2
    answer = Client().get("/api/v1/formats/").json()
    assert [build["engine_build"] for build in answer["builds"]] == ["0.32.0"]
    cells = {row["key"]: row["cells"][0] for row in answer["rows"]}
    assert cells["draft_model"]["state"] == "certified" and cells["draft_model"]["pairs"] == 1
    assert cells["eagle1:EagleLlamaForCausalLM"]["state"] == "failed"
    assert cells["eagle1:EagleLlamaForCausalLM"]["code"] == "engine:refused-pair"
    assert (
        cells["speculators:mtp"]["state"] == "refused"
        and "cannot load speculators_model_type 'mtp'" in cells["speculators:mtp"]["detail"]
    )
    assert cells["speculators:eagle3"]["state"] == "loads" and "eagle3 control passes" in cells["speculators:eagle3"]["detail"]
    named = {"speculators:eagle3", "speculators:peagle", "speculators:dflash", "speculators:dflash2", "speculators:dspark",
             "eagle_wrapper:eagle", "draft_model", "mtp", "ngram", "suffix"}  # fmt: skip
    assert named <= set(cells) and any(key.startswith("eagle3:") for key in cells)
    page = Client().get("/formats/")
    assert page.status_code == 200 and all(escape(row["label"]).encode() in page.content for row in answer["rows"])


@pytest.mark.django_db
def test_a_format_added_to_the_gates_table_gets_its_row(monkeypatch: pytest.MonkeyPatch):
    before = {row["key"] for row in Client().get("/api/v1/formats/").json()["rows"]}
    for module in (vllm_support, rules):
        monkeypatch.setattr(module, "SPECULATORS_TYPES", vllm_support.SPECULATORS_TYPES | {"eagle4"})
    monkeypatch.setitem(vllm_support.SPECULATORS_METHOD, "eagle4", ("eagle3", {}))
    rows = {row["key"]: row for row in Client().get("/api/v1/formats/").json()["rows"]}
    assert set(rows) - before == {"speculators:eagle4"}
    assert rows["speculators:eagle4"]["cells"][0]["state"] == "loads" and rows["speculators:eagle4"]["method"] == "eagle3"
    assert b"speculators eagle4" in Client().get("/formats/").content


@pytest.mark.django_db
def test_the_format_matrix_shows_each_family_certified_on_each_build_and_the_gemma_4_assistant_row():
    """Issue 60: a row per family Speculators ships drafts for, its certified pairs by format on each build."""
    for family in ("qwen3", "qwen3", "gpt-oss"):
        pair = PairFactory.create(method="eagle3", format_metadata={"kind": "speculators", "algorithm": "eagle3"})
        pair.verifier.family = family
        pair.verifier.save()
        finish_run(pair)
    qualification_record(document=dict(record()), rejudge=False)
    answer = Client().get("/api/v1/formats/").json()
    families = {row["family"]: row for row in answer["families"]}
    assert list(families) == ["llama", "qwen3", "gpt-oss", "gemma4"]
    assert families["qwen3"]["cells"] == [{"pairs": 2, "formats": ["speculators:eagle3"]}]
    assert families["gpt-oss"]["cells"][0]["pairs"] == 1 and families["gemma4"]["cells"][0]["pairs"] == 0
    assert "GptOssForCausalLM" in families["gpt-oss"]["eagle3"]
    assert "Gemma4Processor" in families["gemma4"]["cpu_unloadable"]["Gemma4ForConditionalGeneration"]
    rows = {row["key"]: row for row in answer["rows"]}
    assert rows["gemma4_assistant:gemma4_assistant"]["method"] == "mtp"
    page = Client().get("/formats/").content.decode()
    assert 'id="family-gpt-oss"' in page and "certified (2)" in page and "Gemma 4 assistant (gemma4_assistant)" in page
