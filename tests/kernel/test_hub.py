"""kernel.hub with the real huggingface_hub client against olah serving the toy zoo."""

from __future__ import annotations

import json
from collections import OrderedDict

import pytest

from kernel import hub
from kernel.errors import InfraError, UserError
from kernel.formats import tokenizer_hash
from kernel.formats.inputs import RepoMetadata
from kernel.hub import HubClient, check_filename
from kernel.traffic import ChatTemplate
from kernel.traffic.templates import switches
from tests.services import free_port
from zoo.localhub import THINKING_REVISION, LocalHub, _git, commit_all, git_sha

DRAFT = "spechub-toy/llama-draft-1l"
VERIFIER = "spechub-toy/llama-verifier"


def mirror_sha(hub: LocalHub, repo_id: str, ref: str) -> str:
    return git_sha(hub.mirror(repo_id), ref)


def test_main_a_tag_a_branch_and_a_sha_all_resolve(local_hub, hub_client):
    for ref in ("main", "v1.0", "experimental"):
        assert hub_client.resolve(DRAFT, ref) == mirror_sha(local_hub, DRAFT, ref)
    tagged = mirror_sha(local_hub, DRAFT, "v1.0")
    assert hub_client.resolve(DRAFT, tagged) == tagged
    assert len({mirror_sha(local_hub, DRAFT, ref) for ref in ("main", "v1.0", "experimental")}) == 3


def test_the_verifiers_thinking_revision_takes_a_thinking_switch_and_main_stays_as_it_was(local_hub, hub_client):
    """Issue 53: a branch of the verifier whose chat template takes `enable_thinking`; only its tokenizer_config differs."""
    thinking = hub_client.resolve(VERIFIER, THINKING_REVISION)
    assert thinking == mirror_sha(local_hub, VERIFIER, THINKING_REVISION) != mirror_sha(local_hub, VERIFIER, "main")
    changed = _git(local_hub.mirror(VERIFIER), "diff", "--name-only", "main", THINKING_REVISION)
    assert changed == "tokenizer_config.json"
    found = {ref: switches(ChatTemplate.from_tokenizer_config(hub_client.metadata(VERIFIER, ref).tokenizer_config))
             for ref in ("main", thinking)}  # fmt: skip
    assert (found["main"].names, found[thinking].thinking) == ((), "enable_thinking")


def test_model_info_without_a_revision_works_through_the_seeded_meta_head(local_hub, hub_client):
    assert hub_client.api.model_info(DRAFT).sha == mirror_sha(local_hub, DRAFT, "main")


def test_a_metadata_fetch_downloads_no_weight_file(local_hub, hub_client):
    meta = hub_client.metadata(VERIFIER, "main")
    assert meta.config is not None and meta.config["hidden_size"] == 256
    assert meta.safetensors["model.safetensors"]["model.embed_tokens.weight"]["shape"] == [2048, 256]
    assert {"config.json", "tokenizer.json"} <= local_hub.fetched(VERIFIER)  # read from the server, size-capped
    cached = [p.name for p in hub_client.cache_dir.rglob("*") if p.is_file()]
    assert not [name for name in cached if name.endswith((".safetensors", ".bin"))], cached


def test_a_pinned_snapshot_keeps_its_revision_after_main_moves(tmp_path):
    with LocalHub(root=tmp_path / "hub") as hub:
        client = HubClient(endpoint=hub.endpoint, cache_dir=tmp_path / "cache")
        pinned = client.resolve(VERIFIER, "main")
        original = (hub.mirror(VERIFIER) / "config.json").read_text()
        config = json.loads(original)
        config["max_position_embeddings"] = 4096
        (hub.mirror(VERIFIER) / "config.json").write_text(json.dumps(config))
        moved = commit_all(hub.mirror(VERIFIER), "Longer context", "2026-11-05T12:00:00+00:00")
        assert client.resolve(VERIFIER, "main") == moved != pinned
        snapshot = client.snapshot(VERIFIER, pinned)
    assert snapshot.name == pinned
    assert (snapshot / "config.json").read_text() == original
    assert (snapshot / "model.safetensors").stat().st_size > 1_000_000


def test_a_commit_is_read_once_a_branch_resolved_each_time_and_a_callers_change_stays_its_own(hub_client, monkeypatch):
    monkeypatch.setattr(hub, "_kept", OrderedDict())
    reads: list[str] = []
    read_at = HubClient._read_at

    def counted(self: HubClient, repo_id: str, sha: str) -> RepoMetadata:
        reads.append(sha)
        return read_at(self, repo_id, sha)

    monkeypatch.setattr(HubClient, "_read_at", counted)
    main = hub_client.resolve(VERIFIER, "main")
    first = hub_client.metadata(VERIFIER, main)
    first.config["hidden_size"] = -1  # the caller's own copy
    again = hub_client.metadata(VERIFIER, "main")  # the branch is resolved again, the commit not read again
    assert again.config["hidden_size"] > 0 and again.sha == main and reads == [main]
    other = HubClient(endpoint=hub_client.endpoint, cache_dir=hub_client.cache_dir, token="another-token")
    assert other.metadata(VERIFIER, main).sha == main and reads == [main, main]  # another token reads for itself


@pytest.mark.parametrize(("repo_id", "revision"), [("spechub-toy/no-such-model", "main"), (DRAFT, "no-such-branch")])
def test_a_missing_repo_or_revision_is_a_user_error(hub_client, repo_id, revision):
    with pytest.raises(UserError) as error:
        hub_client.resolve(repo_id, revision)
    assert error.value.code == "hub:not-found"
    assert f"{repo_id}@{revision}" in error.value.message and "What to do" in error.value.message


def test_a_server_that_is_down_is_an_infra_error_after_retries(tmp_path):
    client = HubClient(endpoint=f"http://127.0.0.1:{free_port()}", cache_dir=tmp_path, retries=2, backoff=0.01)
    with pytest.raises(InfraError) as error:
        client.resolve(VERIFIER, "main")
    assert error.value.code == "hub:unreachable" and error.value.retryable


def test_a_snapshot_never_fetches_pickles_or_repo_code(hub_client):
    pickled = hub_client.snapshot("spechub-toy/broken-pickle-only", hub_client.resolve("spechub-toy/broken-pickle-only", "main"))
    coded = hub_client.snapshot("spechub-toy/broken-custom-code", hub_client.resolve("spechub-toy/broken-custom-code", "main"))
    assert (pickled / "config.json").exists() and not (pickled / "pytorch_model.bin").exists()
    assert (coded / "model.safetensors").exists() and not (coded / "modeling_toy.py").exists()


def test_metadata_reports_pickles_code_and_unreadable_config(hub_client):
    assert hub_client.metadata("spechub-toy/broken-pickle-only", "main").pickle_files == ["pytorch_model.bin"]
    assert hub_client.metadata("spechub-toy/broken-custom-code", "main").code_files == ["modeling_toy.py"]
    broken = hub_client.metadata("spechub-toy/broken-config-not-json", "main")
    assert broken.config is None and "not valid JSON" in broken.problems["config.json"]


def test_the_tokenizer_hash_tells_same_size_tokenizers_apart(hub_client):
    verifier, draft = hub_client.metadata(VERIFIER, "main"), hub_client.metadata(DRAFT, "main")
    shuffled = hub_client.metadata("spechub-toy/broken-tokenizer-shuffled", "main")
    assert verifier.tokenizer and draft.tokenizer and shuffled.tokenizer
    assert tokenizer_hash(verifier.tokenizer, verifier.tokenizer_config) == tokenizer_hash(
        draft.tokenizer, draft.tokenizer_config
    )
    assert len(shuffled.tokenizer["model"]["vocab"]) == len(verifier.tokenizer["model"]["vocab"])
    assert tokenizer_hash(shuffled.tokenizer, shuffled.tokenizer_config) != tokenizer_hash(
        verifier.tokenizer, verifier.tokenizer_config
    )


def test_the_snapshot_refuses_a_revision_that_is_not_a_sha(hub_client):
    with pytest.raises(ValueError, match="full commit sha"):
        hub_client.snapshot(VERIFIER, "main")


@pytest.mark.parametrize("name", ["../etc/passwd", "/abs/config.json", "a/../../b", "dir\\file", "ok\x00.json", "a//b"])
def test_hostile_file_names_are_refused(name):
    with pytest.raises(UserError, match="Refused file name"):
        check_filename(name)


def test_plain_file_names_pass():
    for name in ("config.json", "sub/dir/model-00001-of-00002.safetensors", "tokenizer.model"):
        check_filename(name)


def test_a_server_that_never_answers_is_a_timeout(tmp_path):
    import socket

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # accepts connections in the kernel, never answers
        endpoint = f"http://127.0.0.1:{silent.getsockname()[1]}"
        client = HubClient(endpoint=endpoint, cache_dir=tmp_path, retries=1, timeout=0.5)
        with pytest.raises(InfraError) as error:
            client.resolve(VERIFIER, "main")
    HubClient(timeout=30)  # restore the shared client's default for later tests
    assert error.value.code == "hub:timeout"


def _constructed(error_class, status: int):
    """Build a client error by hand: olah serves no gated repos and never answers 5xx."""
    import httpx2

    response = httpx2.Response(status, request=httpx2.Request("GET", "http://hub.invalid/api/models/a/b"))
    return error_class(f"HTTP {status}", response=response)


@pytest.mark.parametrize(
    ("error_class", "status", "code", "retryable"),
    [
        ("GatedRepoError", 403, "hub:gated-no-token", False),
        ("RevisionNotFoundError", 404, "hub:revision-not-found", False),
        ("HfHubHTTPError", 503, "hub:server-error", True),
        ("HfHubHTTPError", 429, "hub:server-error", True),
        ("HfHubHTTPError", 408, "hub:server-error", True),
        ("HfHubHTTPError", 400, "hub:refused", False),
        ("HfHubHTTPError", 401, "hub:refused", False),
        ("HfHubHTTPError", 422, "hub:refused", False),
    ],
)
def test_classify_maps_constructed_client_errors(error_class, status, code, retryable):
    from huggingface_hub import errors

    from kernel.hub import classify

    error = classify(_constructed(getattr(errors, error_class), status), "org/name", "main")
    assert (error.code, error.retryable) == (code, retryable)
    assert "org/name@main" in error.message


@pytest.mark.parametrize(
    ("error_class", "status", "code"),
    [
        ("GatedRepoError", 403, "hub:gated"),
        ("HfHubHTTPError", 401, "hub:token-rejected"),
        ("HfHubHTTPError", 403, "hub:token-rejected"),
    ],
)
def test_with_a_token_sent_a_gated_repo_is_the_submitters_and_a_refusal_the_tokens_constructed(error_class, status, code):
    from huggingface_hub import errors

    from kernel.hub import classify

    error = classify(_constructed(getattr(errors, error_class), status), "org/name", "main", authenticated=True)
    assert (error.code, error.retryable) == (code, False)
