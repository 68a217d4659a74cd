#!/usr/bin/env bash
# Set up wfrl from a fresh clone: a virtual environment in .venv with the package (compiled core
# built in place), the real CybORG, and the test tools. Safe to run again.
#   bash scripts/setup.sh            # everything (CybORG + Ray + test tools)
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
PIP=(.venv/bin/python -m pip --disable-pip-version-check --no-input -q)
"${PIP[@]}" install -c constraints.txt -e '.[cyborg,ray,test]'
# gym-csle-cyborg only ships the expanded Scenario2 network; its declared dependencies are ~100
# unrelated packages, so it is installed without them.
"${PIP[@]}" install -c constraints.txt --no-deps gym-csle-cyborg==0.10.1
.venv/bin/python -c "import wfrl._core, wfrl.envs.cyborg as c; assert c.available(), 'CybORG not importable'"
echo "wfrl set up in .venv"
