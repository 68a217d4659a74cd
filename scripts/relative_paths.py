"""Rewrite the absolute machine paths a run wrote into its records (the "out" of
experiment_config.json, checkpoint paths in evaluation JSON, "records in DIR" in a closing text)
as run-relative ones, so that the records can be committed (tests/test_docs.py refuses absolute
paths in any committed file). A path with a runs/ component keeps what follows it
(runs/feas/seed3); any other keeps its last component under runs/.

    .venv/bin/python scripts/relative_paths.py docs/results/search/NEW_RECORD   # rewrite in place
    .venv/bin/python scripts/relative_paths.py --check docs/results             # list, change nothing
"""
import argparse
import json
import re
import sys
from pathlib import Path

# an absolute path into a machine's work, home or temporary directories
ABSOLUTE = re.compile(r"(?<![\w.~-])/(?:work|root|tmp|home/[^/\s\"']+)/[^\s\"',;)]*")


def relative(path: str) -> str:
    """The run-relative form of an absolute path."""
    parts = [p for p in path.split("/") if p]
    if "runs" in parts:
        return "/".join(parts[parts.index("runs"):])
    return "runs/" + parts[-1] if parts else "runs"


def _json_values(obj):
    if isinstance(obj, dict):
        return {k: _json_values(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_json_values(v) for v in obj]
    if isinstance(obj, str):
        return ABSOLUTE.sub(lambda m: relative(m.group(0)), obj)
    return obj


def rewrite(path: Path) -> bool:
    """Rewrite one file in place; whether it changed. JSON keeps its layout (one line or
    indented, as found); other text files have each absolute path replaced."""
    try:
        text = path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return False   # binary (checkpoints, images)
    if not ABSOLUTE.search(text):
        return False
    if path.suffix == ".json":
        lines = text.strip().splitlines()
        indent = (len(lines[1]) - len(lines[1].lstrip(" "))) or 1 if len(lines) > 1 else None
        new = json.dumps(_json_values(json.loads(text)), indent=indent, ensure_ascii=False)
        new += "\n" if text.endswith("\n") else ""
    else:
        new = ABSOLUTE.sub(lambda m: relative(m.group(0)), text)
    path.write_text(new, encoding="utf-8")
    return True


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+", help="record files or folders (searched recursively)")
    ap.add_argument("--check", action="store_true",
                    help="list the lines with absolute paths and exit 1 if there are any; change nothing")
    a = ap.parse_args(argv)
    files = []
    for p in map(Path, a.paths):
        if not p.exists():
            print(f"relative_paths: error: {p} does not exist", file=sys.stderr)
            return 2
        files += sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else [p]
    found = 0
    for f in files:
        if a.check:
            try:
                lines = f.read_text(encoding="utf-8").splitlines()
            except (UnicodeDecodeError, OSError):
                continue
            for n, line in enumerate(lines, 1):
                if ABSOLUTE.search(line):
                    found += 1
                    print(f"{f}:{n}: {line.strip()[:120]}")
        elif rewrite(f):
            found += 1
            print(f"rewrote {f}")
    if a.check:
        return 1 if found else 0
    print(f"{found} file(s) rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main())
