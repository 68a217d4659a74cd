"""The front door stays a front door, and what the prose names exists: every repository path a
README/docs page or a source comment mentions is a file or folder of the repository."""
import pathlib
import re
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
# a path into one of the project's folders, with a file extension or a trailing slash
PATH = re.compile(r"(?<![\w./-])((?:wfrl|csrc|tests|bench|docs|scripts|examples)/[\w./-]*(?:\.[a-z]+\b|/))(\*?)")
# run directories and other things a user creates, not files of the repository
GENERATED = ("runs/", "dist/", "build/", "docs/results/search/feasibility/seed")


def _tracked(patterns):
    out = subprocess.run(["git", "ls-files", *patterns], cwd=ROOT, capture_output=True, text=True)
    if out.returncode:  # not a git checkout (an sdist): fall back to globbing
        return [p for pat in patterns for p in ROOT.glob(pat)]
    return [ROOT / f for f in out.stdout.split()]


def _texts():
    files = _tracked(["README.md", "docs/*.md", "wfrl/*.py", "wfrl/**/*.py", "csrc/*.h",
                      "csrc/*.pyx", "tests/*.py", "bench/*.py", "scripts/*"])
    return [f for f in files if f.is_file() and f.name != "test_docs.py"]


def test_readme_is_a_front_door():
    size = (ROOT / "README.md").stat().st_size
    assert size <= 12_000, f"README.md is {size} bytes (≤ 12,000): move detail to docs/"


def test_every_named_path_exists():
    missing = []
    for f in _texts():
        for m in PATH.finditer(f.read_text(encoding="utf-8")):
            p = m.group(1).rstrip(".")
            p = re.sub(r"[:#].*$", "", p)  # file.py:function, page.md#anchor
            if m.group(2) or "NAME" in p or any(g in p for g in GENERATED):
                continue
            if not (ROOT / p).exists():
                missing.append(f"{f.relative_to(ROOT)}: {p}")
    assert not missing, "named but not in the repository:\n" + "\n".join(sorted(set(missing)))


@pytest.mark.parametrize("page", sorted(p.name for p in (ROOT / "docs").glob("*.md")))
def test_docs_links_resolve(page):
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if target.startswith("http"):
            continue
        assert (ROOT / "docs" / target).exists(), f"docs/{page} links to missing {target}"


def test_c_headers_name_their_real_python_twins():
    """Each csrc header's `path.py (names)` mentions name a file holding those definitions."""
    for h in sorted((ROOT / "csrc").glob("*.h")):
        text = " ".join(h.read_text().split())
        for path, names in re.findall(r"(wfrl/[\w/]+\.py) \(([^)]*)\)", text):
            src = (ROOT / path).read_text()
            for name in re.findall(r"[A-Za-z_]\w+", names):
                if name in ("and", "in", "torch"):
                    continue
                assert re.search(rf"^\s*(?:def|class) {name}\b", src, re.M), \
                    f"{h.name} names {name} in {path}, which does not define it"
