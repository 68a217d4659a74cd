"""The front door stays a front door, and what the prose names exists: every repository path a
README/docs page or a source comment mentions is a file or folder of the repository."""
import pathlib
import re
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
# a path into one of the project's folders, with a file extension or a trailing slash
PATH = re.compile(r"(?<![\w./-])((?:wfrl|csrc|tests|bench|docs|scripts|examples|experiments)/[\w./-]*(?:\.[a-z]+\b|/))(\*?)")
# run directories and other things a user creates, not files of the repository
GENERATED = ("runs/", "dist/", "build/", "docs/results/search/feasibility/seed")


def _tracked(patterns):
    out = subprocess.run(["git", "ls-files", *patterns], cwd=ROOT, capture_output=True, text=True)
    if out.returncode:  # not a git checkout (an sdist): fall back to globbing
        return [p for pat in patterns for p in ROOT.glob(pat)]
    return [ROOT / f for f in out.stdout.split()]


def _texts():
    files = _tracked(["README.md", "docs/*.md", "wfrl/*.py", "wfrl/**/*.py", "csrc/*.h",
                      "csrc/*.pyx", "csrc/*.pxi", "csrc/*.pxd", "tests/*.py", "bench/*.py",
                      "scripts/*", "experiments/*"])
    return [f for f in files if f.is_file() and f.name != "test_docs.py"]


def test_readme_is_a_front_door():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    size, lines = len(text.encode()), len(text.splitlines())
    assert size <= 12_000, f"README.md is {size} bytes (≤ 12,000): move detail to docs/"
    assert lines <= 120, f"README.md is {lines} lines (≤ 120): move detail to docs/"


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


# ---- docs/ as a reference, records indexed by claim ----------------------------------------

PAGE_MAX = 15_000          # bytes per docs page
RESULTS_MAX = 3_000_000    # bytes of docs/results/ in all
INDEX = ROOT / "docs" / "results" / "README.md"
# Pages being rewritten elsewhere; each stays exempt from the word check only until its rewrite lands.
PAGES_UNDER_REWRITE: set = set()
RECORD = re.compile(r"docs/results/[\w./-]*[\w/]")


def _rel(p):
    return p.relative_to(ROOT).as_posix()


def _text(p):
    try:
        return p.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return None  # binary (checkpoints, images)


def _pages():
    return [p for p in _tracked(["README.md", "CHANGELOG.md", "docs/*.md"]) if p.is_file()]


@pytest.mark.parametrize("page", sorted(p.name for p in (ROOT / "docs").glob("*.md")))
def test_docs_page_is_short(page):
    size = (ROOT / "docs" / page).stat().st_size
    assert size <= PAGE_MAX, f"docs/{page} is {size} bytes (≤ {PAGE_MAX:,}): link to records instead"


def test_results_folder_stays_small():
    files = [p for p in _tracked(["docs/results"]) if p.is_file()]
    total = sum(p.stat().st_size for p in files)
    assert files and total <= RESULTS_MAX, \
        f"docs/results holds {total:,} bytes (≤ {RESULTS_MAX:,}): drop or compress superseded records"


def test_no_work_period_words_in_docs_or_records():
    """Docs say what is true now: no "session" (the word of a lab notebook) in the README,
    the changelog, the pages or any text record, and no file or folder named after one."""
    bad = []
    files = _pages() + [p for p in _tracked(["docs/results"]) if p.is_file()]
    for f in files:
        if _rel(f) in PAGES_UNDER_REWRITE:
            continue
        text = _text(f)
        if text is None:
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if re.search(r"session", line, re.I):
                bad.append(f"{_rel(f)}:{n}: {line.strip()[:100]}")
    paths = [_rel(p) for p in _tracked(["."])]
    bad += [f"path: {p}" for p in paths if re.search(r"session", p, re.I)]
    assert not bad, "work-period words in docs or records:\n" + "\n".join(bad[:40])


def _named_records():
    named = {}
    for page in _pages():
        if page == INDEX:
            continue
        for m in RECORD.finditer(page.read_text(encoding="utf-8")):
            named.setdefault(m.group(0).rstrip("/."), set()).add(_rel(page))
    return named


def test_every_record_named_in_docs_exists_and_is_indexed():
    index = INDEX.read_text(encoding="utf-8")
    indexed = {m.group(0).rstrip("/.") for m in RECORD.finditer(index)}
    named = _named_records()
    assert named, "no page names a record: the pattern no longer matches"
    missing, unindexed = [], []
    for rec, pages in sorted(named.items()):
        if rec == "docs/results/README.md":
            continue
        if not (ROOT / rec).exists():
            missing.append(f"{rec} (named in {', '.join(sorted(pages))})")
        # indexed: the record itself, or a folder that holds it, has a line in the index
        if not any(rec == i or rec.startswith(i + "/") for i in indexed):
            unindexed.append(f"{rec} (named in {', '.join(sorted(pages))})")
    assert not missing, "records named in docs but absent:\n" + "\n".join(missing)
    assert not unindexed, "records named in docs but not in docs/results/README.md:\n" + "\n".join(unindexed)


def test_every_indexed_record_exists():
    index = INDEX.read_text(encoding="utf-8")
    gone = sorted({m.group(0).rstrip("/.") for m in RECORD.finditer(index)
                   if not (ROOT / m.group(0).rstrip("/.")).exists()})
    assert not gone, "docs/results/README.md indexes records that do not exist:\n" + "\n".join(gone)


# an absolute path into a machine's work, home or temporary directories
_ABS = re.compile(r"(?<![\w.~-])/(?:" + "|".join(["wo" + "rk", "ro" + "ot", "t" + "mp"]) + r")/"
                  r"|(?<![\w.~-])/ho" + r"me/[a-z]")


def test_no_absolute_machine_path_in_any_committed_file():
    """Records and code name paths relative to the repository or to a run directory; a path of
    the machine that made them means nothing elsewhere."""
    bad = []
    for f in _tracked(["."]):
        if not f.is_file():
            continue
        text = _text(f)
        if text is None:
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if _ABS.search(line):
                bad.append(f"{_rel(f)}:{n}: {line.strip()[:120]}")
    assert not bad, "absolute machine paths in committed files:\n" + "\n".join(bad[:40])


def test_the_path_check_catches_what_it_is_for():
    for s in ['"out": "' + "/wo" + 'rk/runs/feas3/seed8"', "PY=/wo" + "rk/main/.venv/bin/python",
              "records in /t" + "mp/feas/runs/seed0", "/ro" + "ot/.cache/x", "cd /ho" + "me/alice/wfrl"]:
        assert _ABS.search(s), s
    for s in ["runs/feas3/seed8", "docs/results/recipe/", "/dev/shm/wfrl-1", "/proc/net/tcp",
              "$TMPDIR/x", "network/tmp/"]:
        assert not _ABS.search(s), s


MODULE_MAX_LINES = 600


def test_no_module_is_a_grab_bag():
    """Modules stay one subject each; past this size a module is split by subject."""
    long = []
    for f in (ROOT / "wfrl").rglob("*.py"):
        n = len(f.read_text(encoding="utf-8").splitlines())
        if n > MODULE_MAX_LINES:
            long.append(f"{f.relative_to(ROOT)}: {n} lines")
    assert not long, f"modules over {MODULE_MAX_LINES} lines:\n" + "\n".join(long)
