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
"${PIP[@]}" install -c constraints.txt -e '.[train,cyborg,ray,test,tensorboard,sb3,duel]'
# gym-csle-cyborg only ships the expanded Scenario2 network; its declared dependencies are ~100
# unrelated packages, so it is installed without them.
"${PIP[@]}" install -c constraints.txt --no-deps gym-csle-cyborg==0.10.1
.venv/bin/python -c "import wfrl._core, wfrl.envs.cyborg as c; assert c.available(), 'CybORG not importable'"
# Chromium (Debian's package) for the viewer tests (tests/test_viewer.py): installed with apt-get
# as root or through passwordless sudo; where apt-get is absent they are skipped with the reason.
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1; then
        AS_ROOT=(); [ "$(id -u)" -eq 0 ] || AS_ROOT=(sudo -n)
        "${AS_ROOT[@]}" apt-get update -qq
        "${AS_ROOT[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
    else
        echo "apt-get not available: Chromium not installed, the viewer tests will be skipped" >&2
    fi
fi
echo "wfrl set up in .venv"
