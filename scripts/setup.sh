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
EXTRAS=train,cyborg,ray,test,tensorboard,sb3,duel
# wfrl itself (the compiled core: one C file, the longest step) is built and installed editable on
# one core while pip installs the dependencies on the other: two pip processes, the first with
# --no-deps, so they write no file in common. One after the other they took 146 s on the 2-core
# VM (docs/install.md, "Build time").
"${PIP[@]}" install -c constraints.txt 'setuptools>=69' 'Cython>=3.0'
"${PIP[@]}" install -c constraints.txt --no-deps --no-build-isolation -e . \
    > .venv/build_core.log 2>&1 &
BUILD=$!
trap 'kill "$BUILD" 2>/dev/null || true' EXIT
# the dependencies of the package and of every extra named, as pyproject.toml declares them
mapfile -t DEPS < <(.venv/bin/python - "$EXTRAS" <<'PY'
import sys, tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
extras = project["optional-dependencies"]
print("\n".join(project["dependencies"] + [d for e in sys.argv[1].split(",") for d in extras[e]]))
PY
)
"${PIP[@]}" install -c constraints.txt "${DEPS[@]}"
if ! wait "$BUILD"; then
    cat .venv/build_core.log >&2
    echo "setup: wfrl did not build (pip's log is above)" >&2
    exit 1
fi
trap - EXIT
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
