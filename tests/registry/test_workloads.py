"""Users' own traffic through the API and the pages: upload, certify privately, compare, export, delete.

Pairs are registered through the real gate against olah; certifications run through the real certify task
with injected stages that read the run's workload file (test doubles for the engine measurements).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client, override_settings

from kernel.certificates import payload_of
from registry.certificates.publishing import certificate_hub_pr_open
from registry.models import Certificate, CertificationRun, Pair, Workload
from registry.runs.submissions import submission_create
from registry.states import RunState
from registry.tasks.certify import certify
from registry.traffic.services import workload_files_clear

pytestmark = pytest.mark.django_db(transaction=True)
ORG = "spechub-toy"
VERIFIER = f"{ORG}/llama-verifier"
SUITE = Path(__file__).parents[2] / "workers/suites/toy-v2.json"


@pytest.fixture
def owner(db):
    return User.objects.create_user("owner", password="pw")


@pytest.fixture
def stranger(db):
    return User.objects.create_user("stranger", password="pw")


def client_of(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def pairs(hub_settings, owner):
    """The distilled draft and the EAGLE-3 head for the toy verifier, registered through the real gate."""
    found = []
    for draft in ("llama-draft-1l", "eagle3-head"):
        submission = submission_create(user=owner, repo_id=f"{ORG}/{draft}", verifier_repo_id=VERIFIER, certify=False)
        assert submission.pair is not None, submission.refusal_message
        found.append(submission.pair)
    return found


def jsonl(*items: object) -> str:
    return "".join(json.dumps(item) + "\n" for item in items)


CHAT = [{"messages": [{"role": "user", "content": f"Is the {thing} small?"}], "max_tokens": 16, "category": "chat"}
        for thing in ("tree", "bird", "lamp", "city")]  # fmt: skip
FORMATS = {
    "openai-chat": jsonl(*CHAT),
    "vllm-custom": jsonl({"prompt": "def total_46(x):\n", "output_tokens": 16}, {"prompt": "Q: What is 11 + 17?\nA:"}),
    "sharegpt": json.dumps(
        [{"conversations": [{"from": "human", "value": "Is the book dark?"}, {"from": "gpt", "value": "No."}]}]
    ),
    "suite": SUITE.read_text(),
    "text": "Q: What is 26 + 23?\nA:\nTranslate to French: the red tree sings.\nFrench:\n",
}


def upload(client: Client, text: str, *, name: str = "mine", as_file: bool = True):
    if as_file:
        data = {"name": name, "verifier": VERIFIER, "file": SimpleUploadedFile("traffic.jsonl", text.encode())}
        return client.post("/api/v1/workloads/", data)
    return client.post(
        "/api/v1/workloads/", {"name": name, "verifier": VERIFIER, "content": text}, content_type="application/json"
    )


@pytest.mark.parametrize("kind", sorted(FORMATS))
def test_each_format_uploads_and_the_same_requests_again_are_recognised(pairs, owner, kind):
    client = client_of(owner)
    created = upload(client, FORMATS[kind])
    assert created.status_code == 201, created.json()
    body = created.json()
    assert body["format"] == kind and body["sampled"] == body["unique_requests"] > 0
    assert body["measured"].startswith(f"{body['sampled']} of your {body['total_requests']} requests") and body[
        "measured"
    ].endswith("seed 0")
    again = upload(client, FORMATS[kind], as_file=False)
    assert (again.status_code, again.json()["id"]) == (200, body["id"])
    stored = Workload.objects.get(pk=body["id"])
    assert all(r["text"] and r["tokens"] for r in stored.sample)  # rendered with the verifier's template, and measured


def test_a_thousand_requests_are_sampled_to_the_limit_with_a_seed(pairs, owner, settings):
    settings.SPECHUB_WORKLOAD_SAMPLE = 50
    lines = jsonl(*({"prompt": f"Q: What is {i} + {i % 7}?\nA:", "category": "math"} for i in range(1000)))
    body = upload(client_of(owner), lines).json()
    assert (body["total_requests"], body["sampled"], body["categories"]) == (1000, 50, {"math": 50})
    assert body["measured"] == "50 of your 1,000 requests, seed 0"


@pytest.mark.parametrize(
    ("text", "code", "said"),
    [
        (
            jsonl(*CHAT[:2]) + '{"messages": [{"role": "user", "content": 7}]}\n',
            "workload:invalid",
            "line 3: `messages[0].content` is not a string",
        ),
        (jsonl(CHAT[0]) + "{not json\n", "workload:invalid", "line 2: not valid JSON"),
        (
            jsonl(CHAT[0]) + '{"prompt": "x", "chat_template_kwargs": {"t": 1e400}}\n',
            "workload:invalid",
            "line 2: not valid JSON (1e400",
        ),
        (jsonl(CHAT[0], {"prompt": "the tree " * 400}), "workload:too-long", "line 2: the prompt is"),
    ],
)
def test_hostile_uploads_are_refused_naming_the_line_and_nothing_is_stored(pairs, owner, text, code, said):
    refused = upload(client_of(owner), text)
    assert refused.status_code == 422
    assert refused.json()["error"]["code"] == code and said in refused.json()["error"]["message"]
    assert not Workload.objects.exists()


def test_an_upload_past_the_limit_is_refused_as_too_large_before_its_body_is_read(pairs, owner, settings):
    line = (json.dumps({"prompt": "x" * 1000}) + "\n").encode()
    refused = client_of(owner).post(
        "/api/v1/workloads/", {"verifier": VERIFIER, "file": SimpleUploadedFile("big.jsonl", line * (50 * 1024))}
    )
    assert refused.status_code == 413 and refused.json()["error"]["code"] == "too-large"
    assert "a workload upload may be 20,971,520 bytes" in refused.json()["error"]["message"]
    # A body that declares 100 MB is refused on its declaration: Django never reads or spools it.
    declared = Client().post("/api/v1/compatibility/", b"{}", content_type="application/json", CONTENT_LENGTH=str(100 * 2**20))
    assert declared.status_code == 413
    # Within the body limit, the reader's own limit still names the line where the upload passed it.
    settings.SPECHUB_WORKLOAD_MAX_BYTES = 1024
    over = client_of(owner).post("/api/v1/workloads/", {"verifier": VERIFIER, "file": SimpleUploadedFile("b.jsonl", line * 2)})
    assert over.status_code == 422 and over.json()["error"]["code"] == "workload:too-large"
    assert "bytes, the limit" in over.json()["error"]["message"]
    assert not Workload.objects.exists()


@pytest.mark.parametrize(
    ("escape", "said"), [("\\u0000", "a NUL character (U+0000)"), ("\\ud800", "half of a UTF-16 surrogate pair (U+D800)")]
)
def test_text_no_database_stores_is_refused_naming_the_line_and_the_character(pairs, owner, escape, said):
    text = jsonl(CHAT[0]) + '{"prompt": "a' + escape + 'b"}\n'
    refused = upload(client_of(owner), text)
    assert refused.status_code == 422 and f"line 2: the text holds {said}" in refused.json()["error"]["message"]
    assert not Workload.objects.exists()


def test_a_nul_in_the_upload_forms_name_or_verifier_is_refused_not_a_500(pairs, owner):
    def data(**fields: str) -> dict[str, object]:
        return {"name": "mine", "verifier": VERIFIER, "file": SimpleUploadedFile("t.jsonl", FORMATS["text"].encode()), **fields}

    for fields in ({"name": "mine\x00"}, {"verifier": VERIFIER + "\x00"}):
        api = client_of(owner).post("/api/v1/workloads/", data(**fields))
        said = json.dumps(api.json()["error"])
        assert api.status_code == 400 and ("NUL character" in said or "Null characters are not allowed" in said), said
        page = client_of(owner).post("/workloads/", data(**fields))
        assert page.status_code in (400, 422) and "NUL character" in page.content.decode(), fields
    assert not Workload.objects.exists()


@pytest.mark.parametrize(
    "path", ["/api/v1/compatibility/", "/api/v1/submissions/", "/api/v1/webhooks/", "/api/v1/workloads/", "runs"]
)
def test_json_nested_a_thousand_deep_is_a_400_with_the_reason(pairs, owner, path):
    if path == "runs":  # a workload's runs: the owner's own workload, so the body is read
        path = f"/api/v1/workloads/{upload(client_of(owner), FORMATS['text']).json()['id']}/runs/"
    body = "[" * 1000 + "]" * 1000
    for client in (Client(), client_of(owner)):
        answer = client.post(path, body, content_type="application/json")
        assert answer.status_code in (400, 401, 403, 404), (path, answer.status_code)
        if answer.status_code == 400:
            assert "nested too deeply" in answer.json()["error"]["message"]
    assert client_of(owner).post(path, body, content_type="application/json").status_code == 400  # read, and refused


def test_a_multipart_file_with_a_250_character_extension_is_spooled_under_a_name_the_disk_takes():
    big = SimpleUploadedFile("x." + "e" * 250, b"0" * (3 * 1024 * 1024))  # over 2.5 MB: Django spools it to disk
    answer = Client().post("/api/v1/compatibility/", {"draft": "../a", "verifier": "../b", "file": big})
    assert 400 <= answer.status_code < 500, answer.status_code


def test_a_private_certificate_downloads_for_its_owner_by_token_too(measured, owner):
    from rest_framework.authtoken.models import Token

    certificate = Certificate.objects.get(run=measured[1][0])
    token = Token.objects.create(user=owner)
    answer = Client().get(f"/api/v1/certificates/{certificate.pk}/download/", HTTP_AUTHORIZATION=f"Token {token.key}")
    assert answer.status_code == 200 and answer.content == certificate.document.encode()


def test_a_json_body_over_djangos_limit_says_to_upload_the_file_as_multipart(owner):
    body = json.dumps({"verifier": VERIFIER, "content": "x" * 3_000_000})
    refused = client_of(owner).post("/api/v1/workloads/", body, content_type="application/json")
    assert refused.status_code == 413 and refused.json()["error"]["code"] == "too-large"
    assert "multipart" in refused.json()["error"]["message"]


def test_an_unknown_verifier_and_an_anonymous_upload_are_refused(pairs, owner):
    refused = client_of(owner).post(
        "/api/v1/workloads/", {"verifier": "nobody/none", "content": "hi"}, content_type="application/json"
    )
    assert refused.status_code == 400 and "not a verifier in the catalog" in refused.json()["error"]["message"]
    assert Client().post(
        "/api/v1/workloads/", {"verifier": VERIFIER, "content": "hi"}, content_type="application/json"
    ).status_code in (401, 403)


def certify_all(workload_id: int, client: Client) -> list[CertificationRun]:
    queued = client.post(f"/api/v1/workloads/{workload_id}/runs/", {"drafts": "all"}, content_type="application/json")
    assert queued.status_code == 201, queued.json()
    runs = list(CertificationRun.objects.filter(pk__in=[r["id"] for r in queued.json()]))
    with override_settings(SPECHUB_DIRECTOR_STAGES="tests.support.stages.injected_stages_on_a_workload"):
        for run in runs:
            assert certify.apply(args=(run.pk,)).result == "finished"
    return runs


@pytest.fixture
def measured(pairs, owner, monkeypatch, tmp_path):
    """A workload with both drafts certified on it, privately."""
    monkeypatch.setenv("SPECHUB_WORKLOAD_DIR", str(tmp_path / "workloads"))
    client = client_of(owner)
    workload = upload(client, FORMATS["openai-chat"]).json()
    runs = certify_all(workload["id"], client)
    return workload, runs


def test_two_drafts_certified_on_a_workload_with_injected_stages_are_compared_and_one_recommended(
    measured, owner, pairs, tmp_path
):
    workload, runs = measured
    assert {run.state for run in CertificationRun.objects.filter(pk__in=[r.pk for r in runs])} == {RunState.FINISHED}
    assert not any((tmp_path / "workloads").iterdir())  # the prompts left the worker's disk with the run
    report = client_of(owner).get(f"/api/v1/workloads/{workload['id']}/report/?concurrency=1").json()
    assert len(report["candidates"]) == 2 and report["measured_levels"] == [1, 4] and report["hardware"] == "cpu"
    best = report["recommendation"]
    assert best["pair"] == pairs[0].pk and "at concurrency 1 (the interval for 2 drafts at once)" in best["reason"]
    assert "greedy outputs equal to the verifier's, sampling keeps its distribution" in best["reason"]
    first = report["candidates"][0]
    assert first["at_concurrency"]["speedup"] == 1.6 and first["at_concurrency"]["interval"] == [1.4, 1.8]
    assert first["acceptance"]["mean_acceptance_length"] == 3.4 and first["equivalent"]
    assert report["candidates"][1]["at_concurrency"]["supports"] != "faster"
    between = client_of(owner).get(f"/api/v1/workloads/{workload['id']}/report/?concurrency=2").json()
    assert all(c["at_concurrency"] is None for c in between["candidates"])  # nothing interpolated
    assert (
        between["recommendation"]["pair"] is None
        and "No draft was measured at concurrency 2" in between["recommendation"]["reason"]
    )
    elsewhere = client_of(owner).get(f"/api/v1/workloads/{workload['id']}/report/?hardware=h100")
    assert elsewhere.status_code == 400 and "No finished run on 'h100'" in elsewhere.json()["error"]["details"]["hardware"]


def test_runs_on_a_private_workload_stay_out_of_the_catalog_and_certificates_carry_only_the_hash(measured, pairs):
    workload, runs = measured
    for pair in Pair.objects.filter(pk__in=[p.pk for p in pairs]):
        assert pair.latest_run_id is None and pair.verdict == ""
    listing = Client().get("/api/v1/pairs/").json()
    assert all(row.get("latest_run") is None for row in listing.get("results", listing)) if isinstance(listing, dict) else True
    certificate = Certificate.objects.get(run=runs[0])
    payload = json.dumps(payload_of(certificate.document.encode()))
    assert f"sha256:{workload['sha256']}" in payload and '"prompts": 4' in payload  # the hash and the counts
    assert '"output_tokens": 16' in payload  # timed as the user's requests ask: max_tokens 16
    run = CertificationRun.objects.get(pk=runs[0].pk)
    assert "Is the tree small?" not in payload and "Is the tree small?" not in json.dumps(run.result)  # never the prompts
    assert not certificate.hub_pr_dispatched_at


def test_a_second_user_gets_404_on_every_page_and_endpoint_of_the_workload_and_its_runs(measured, stranger):
    workload, runs = measured
    run = runs[0]
    certificate = Certificate.objects.get(run=run)
    pk = workload["id"]
    gets = [f"/api/v1/workloads/{pk}/", f"/api/v1/workloads/{pk}/report/", f"/api/v1/workloads/{pk}/export/",
            f"/workloads/{pk}/", f"/workloads/{pk}/export.jsonl", f"/api/v1/runs/{run.pk}/", f"/runs/{run.pk}/",
            f"/api/v1/certificates/{certificate.pk}/", f"/api/v1/certificates/{certificate.pk}/download/"]  # fmt: skip
    posts = [f"/api/v1/workloads/{pk}/runs/", f"/workloads/{pk}/delete/", f"/api/v1/runs/{run.pk}/cancel/"]
    for client in (client_of(stranger), Client()):
        for path in gets:
            assert client.get(path).status_code == 404, path
        for path in posts:  # anonymous, the cancel endpoint asks for a sign-in whether or not the run exists
            nowhere = client.post("/api/v1/runs/999999/cancel/").status_code if "cancel" in path else 404
            assert client.post(path, {"drafts": "all"}, content_type="application/json").status_code == nowhere, path
        assert client.delete(f"/api/v1/workloads/{pk}/").status_code == 404
        listed = client.get("/api/v1/runs/").json()
        assert run.pk not in [r["id"] for r in listed.get("results", listed)]
        assert f"/runs/{run.pk}/" not in client.get("/runs/").content.decode()
    assert client_of(stranger).get("/api/v1/workloads/").json() == []
    assert Workload.objects.get(pk=pk).deleted_at is None


def test_a_private_certificate_is_never_opened_as_a_hub_pr_even_when_asked(measured):
    _, runs = measured
    certificate = Certificate.objects.get(run=runs[0])
    with pytest.raises(ValueError, match="private workload"):
        certificate_hub_pr_open(certificate_id=certificate.pk)


def test_a_worker_starting_removes_the_files_of_ended_runs_and_keeps_those_of_runs_still_going(measured, tmp_path):
    workload, (ended, going) = measured
    CertificationRun.objects.filter(pk=going.pk).update(state=RunState.MEASURING)
    folder = tmp_path / "workloads"
    left = [folder / f"{workload['sha256']}.run{ended.pk}.json", folder / f"{workload['sha256']}.run{ended.pk}.part"]
    kept = folder / f"{workload['sha256']}.run{going.pk}.json"
    for path in (*left, kept):  # as a run killed by its hard time limit leaves them
        path.write_text("{}\n")
    assert workload_files_clear() == sorted(path.name for path in left)
    assert [path.name for path in folder.iterdir()] == [kept.name]


def test_the_owner_exports_the_sample_in_vllms_custom_dataset_format(measured, owner):
    workload, _ = measured
    response = client_of(owner).get(f"/api/v1/workloads/{workload['id']}/export/")
    lines = [json.loads(line) for line in response.getvalue().decode().splitlines()]
    assert len(lines) == 4 and set(lines[0]) == {"prompt", "output_tokens"}
    assert lines[0]["prompt"].startswith("<|bos|><|user|>\n") and lines[0]["output_tokens"] == 16


def test_deleting_a_workload_removes_its_prompts_and_keeps_the_runs_figures(measured, owner):
    workload, runs = measured
    CertificationRun.objects.filter(pk=runs[0].pk).update(error_message="engine: cannot serve 'Is the tree small?'")
    client = client_of(owner)
    assert client.delete(f"/api/v1/workloads/{workload['id']}/").status_code == 200
    stored = Workload.objects.get(pk=workload["id"])
    assert stored.sample == [] and stored.deleted_at is not None
    assert not CertificationRun.objects.filter(workload=stored).exclude(error_message="").exists()  # it may quote one
    report = client.get(f"/api/v1/workloads/{workload['id']}/report/").json()
    assert len(report["candidates"]) == 2  # the aggregate figures stay
    export = client.get(f"/api/v1/workloads/{workload['id']}/export/").getvalue()
    assert export == b""
    again = client.post(f"/api/v1/workloads/{workload['id']}/runs/", {"drafts": "all"}, content_type="application/json")
    assert again.status_code == 400 and "deleted" in again.json()["error"]["message"]


def test_the_pages_show_the_sample_the_quota_and_the_comparison(measured, owner):
    workload, _ = measured
    client = client_of(owner)
    listing = client.get("/workloads/").content.decode()
    assert "1 of 10 workloads" in listing and "4 of your 4 requests, seed 0" in listing
    page = client.get(f"/workloads/{workload['id']}/?concurrency=1").content.decode()
    assert "Use spechub-toy/llama-draft-1l." in page and "Only measured levels are compared (1, 4)" in page
    assert "svg" in page and "Download the measured sample" in page
    _shows_acceptance_by_thinking_mode(measured, owner)


def _shows_acceptance_by_thinking_mode(measured, owner):
    """Where a run measured AL with the thinking switch on and off (issue 53), the report shows both (read from the
    same fixture as the page test above: it costs no second certification)."""
    from workers import modes
    from workers.engines.base import SpecCounters

    workload, runs = measured
    run = CertificationRun.objects.get(pk=runs[0].pk)
    prompts = [
        SpecCounters(drafts=10 + i % 3, draft_tokens=40, accepted=20 + i % 5, per_position=(9, 8, 3, 0)) for i in range(12)
    ]
    counted = (sum(prompts, SpecCounters()), prompts)
    assert run.result is not None
    acceptance = run.result["stages"]["speculative"]["acceptance"]
    both = dict.fromkeys(modes.modes_of("enable_thinking"), counted)
    acceptance["by_mode"] = modes.by_mode("enable_thinking", "each request's own messages", both)
    acceptance["mode"] = {"rendered": "chat template", "chat_template_kwargs": {"enable_thinking": False}}
    run.save(update_fields=["result"])
    page = client_of(owner).get(f"/workloads/{workload['id']}/?concurrency=1").content.decode()
    assert "acceptance by thinking mode on your traffic" in page and "<code>enable_thinking</code>" in page
    assert "thinking on less thinking off: 0.00" in page and "paired over 12 prompts" in page
    assert "<code>enable_thinking=False</code>" in page
    report = client_of(owner).get(f"/api/v1/workloads/{workload['id']}/report/?concurrency=1").json()
    found = next(c["acceptance"] for c in report["candidates"] if c["run"] == run.pk)
    assert found["by_mode"]["difference"]["prompts"] == 12 and found["mode"]["rendered"] == "chat template"


def test_the_certify_form_takes_only_plain_pair_ids(pairs, owner):
    client = client_of(owner)
    workload = upload(client, FORMATS["text"]).json()
    for chosen in (["²"], ["9" * 5000], ["-1", "1e3"]):
        answer = client.post(f"/workloads/{workload['id']}/", {"pair": chosen, "hardware": "cpu"})
        assert answer.status_code == 400 and "pair: " in answer.content.decode(), chosen[0][:8]
    assert not CertificationRun.objects.exists()


def at_once(count: int, call):
    """Run `call(i)` for i < count in threads released together; each thread closes its own connection."""
    from concurrent.futures import ThreadPoolExecutor
    from threading import Barrier

    from django.db import connection

    start = Barrier(count)

    def one(i: int):
        start.wait()
        try:
            return call(i)
        finally:
            connection.close()

    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(one, range(count)))


def test_uploads_and_certifications_at_once_stay_within_the_quotas(pairs, owner, settings):
    settings.SPECHUB_WORKLOAD_QUOTA, settings.SPECHUB_WORKLOAD_RUN_QUOTA = 3, 2
    client = client_of(owner)
    upload(client, FORMATS["text"])  # renders once, so the threads below wait on the lock, not on the Hub

    def another(i: int) -> int:
        return int(upload(client_of(owner), f"Q: What is {i} + 1?\nA:\n").status_code)

    codes = at_once(8, another)
    assert Workload.objects.filter(owner=owner).count() == 3 and sorted(codes).count(201) == 2, codes
    workload = Workload.objects.filter(owner=owner).first()
    assert workload is not None

    def certify_one(i: int) -> int:
        drafts = [pairs[i % 2].pk]
        return client_of(owner).post(f"/api/v1/workloads/{workload.pk}/runs/", {"drafts": drafts},
                                     content_type="application/json").status_code  # fmt: skip

    codes = at_once(8, certify_one)
    assert CertificationRun.objects.filter(workload__owner=owner).count() == 2 and codes.count(201) == 2, codes
