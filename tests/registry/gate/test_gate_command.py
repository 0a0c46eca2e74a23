"""`manage.py gate`: exit 0 compatible, 1 incompatible, 2 could not judge; --json prints every finding."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from django.core.management import CommandError, call_command

from tests.services import free_port
from tests.support.processes import ROOT, process_env
from zoo import ORG

pytestmark = pytest.mark.process

ZOO = ROOT / "zoo" / "models" / ORG
LOCAL_VERIFIER = ["--verifier", str(ZOO / "llama-verifier"), "--verifier-id", f"{ORG}/llama-verifier"]


def gate(*args: str, hub: str | None = None) -> subprocess.CompletedProcess[str]:
    env = process_env({"HF_ENDPOINT": hub, "SPECHUB_HUB_TIMEOUT": "5"} if hub else None, drop=("HF_ENDPOINT",))
    return subprocess.run(
        [sys.executable, "manage.py", "gate", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def test_a_compatible_local_pair_exits_0_and_prints_the_serve_command():
    done = gate("--draft", str(ZOO / "eagle3-head"), *LOCAL_VERIFIER)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("compatible: method eagle3, k=4")
    assert "vllm serve spechub-toy/llama-verifier --speculative-config" in done.stdout


def test_an_incompatible_pair_exits_1_with_the_rule_code_and_its_fix():
    done = gate("--draft", str(ZOO / "broken-tokenizer-shuffled"), *LOCAL_VERIFIER)
    assert done.returncode == 1, done.stderr
    assert "[error] gate:tokenizer-content" in done.stdout and "fix: " in done.stdout


def test_json_against_the_hub_prints_every_finding_and_the_pinned_recipe(local_hub):
    done = gate(
        "--draft", f"{ORG}/llama-draft-1l", "--draft-revision", "v1.0", "--verifier", f"{ORG}/llama-verifier", "--json",
        hub=local_hub.endpoint,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["compatible"] is True and report["vllm_version"] == "0.32.0"
    tagged = local_hub.mirror(f"{ORG}/llama-draft-1l")
    from zoo.localhub import git_sha

    assert report["recipe"]["speculative_config"]["revision"] == git_sha(tagged, "v1.0")


def test_a_broken_repo_on_the_hub_exits_1_and_lists_its_findings_as_json(local_hub):
    done = gate("--draft", f"{ORG}/broken-pickle-only", "--verifier", f"{ORG}/llama-verifier", "--json", hub=local_hub.endpoint)
    assert done.returncode == 1, done.stderr
    codes = [f["code"] for f in json.loads(done.stdout)["findings"]]
    assert "gate:safety-no-safetensors" in codes


def test_a_repo_missing_from_the_hub_exits_1_naming_it(local_hub):
    done = gate("--draft", f"{ORG}/no-such-draft", "--verifier", f"{ORG}/llama-verifier", "--json", hub=local_hub.endpoint)
    assert done.returncode == 1
    assert json.loads(done.stdout)["error"]["code"] == "hub:not-found"


def test_an_unreachable_hub_exits_2():
    done = gate("--draft", f"{ORG}/llama-draft-1l", "--verifier", f"{ORG}/llama-verifier", hub=f"http://127.0.0.1:{free_port()}")
    assert done.returncode == 2
    assert "could not judge (hub:unreachable)" in done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--draft", str(ZOO / "eagle3-head"), "--verifier", str(ZOO / "llama-verifier")], "--verifier-id"),
        (["--draft", "../../etc/passwd", *LOCAL_VERIFIER], "neither a folder nor a Hub repo id"),
        (LOCAL_VERIFIER, "Name a --draft"),
    ],
    ids=["local-verifier-without-id", "hostile-path", "no-draft-for-a-draft-method"],
)
def test_inputs_the_gate_cannot_read_are_a_usage_error_with_status_2(args, message):
    with pytest.raises(CommandError, match=message) as raised:
        call_command("gate", *args)
    assert raised.value.returncode == 2


def test_ngram_needs_no_draft(capsys):
    call_command("gate", *LOCAL_VERIFIER, "--method", "ngram")
    assert '"method":"ngram"' in capsys.readouterr().out
