"""Where the test suite's CPU time goes, process by process: runs pytest with a hook that makes
every Python process of the run (the test processes and every one a test starts, when it exits
normally) append its CPU time, whether it imported torch, the test that started it and its
command line to a log; then sums the log up.

    .venv/bin/python scripts/suite_processes.py --log LOG.tsv [-- PYTEST ARGS ...]
    .venv/bin/python scripts/suite_processes.py --log LOG.tsv --summary-only

The hook is a sitecustomize module in a temp dir put first on PYTHONPATH; a process that sets
its own environment without PYTHONPATH, or dies by a signal (Ray's workers at `ray stop`), is not
logged. The pytest arguments default to the README's `-n 2 -q -p no:cacheprovider`.
"""
import argparse
import collections
import os
import subprocess
import sys
import tempfile

_HOOK = '''import atexit, os, sys, resource
def _wfrl_log_process():
    try:
        r = resource.getrusage(resource.RUSAGE_SELF)
        what = (os.environ.get("PYTEST_CURRENT_TEST", "-") + " | " + " ".join(sys.argv))[:400]
        with open(os.environ["WFRL_PROCESS_LOG"], "a") as f:
            f.write("%.2f\\t%d\\t%s\\n" % (r.ru_utime + r.ru_stime, "torch" in sys.modules,
                                         what.replace("\\t", " ").replace("\\n", " ")))
    except Exception:
        pass
atexit.register(_wfrl_log_process)
'''


def read_log(path):
    rows = []
    with open(path) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) == 3:
                test, _, argv = parts[2].partition(" | ")
                rows.append({"cpu": float(parts[0]), "torch": parts[1] == "1",
                             "test": test.split(" (")[0], "argv": argv})
    return rows


def summary(rows, top=15) -> str:
    outside = [r for r in rows if r["test"] == "-"]
    started = [r for r in rows if r["test"] != "-"]
    torch = [r for r in started if r["torch"]]
    out = [f"processes logged: {len(rows)}, {sum(r['cpu'] for r in rows):,.0f} CPU-s",
           f"  exited outside any test (pytest's controller and workers, with the tests they "
           f"ran in process; nested runs): {len(outside)}, "
           f"{sum(r['cpu'] for r in outside):,.0f} CPU-s",
           f"  processes the tests started: {len(started)}, "
           f"{sum(r['cpu'] for r in started):,.0f} CPU-s",
           f"    of which imported torch: {len(torch)}, {sum(r['cpu'] for r in torch):,.0f} CPU-s",
           f"tests whose processes took the most CPU (top {top}):"]
    by = collections.defaultdict(lambda: [0, 0.0])
    for r in started:
        by[r["test"]][0] += 1
        by[r["test"]][1] += r["cpu"]
    for test, (n, cpu) in sorted(by.items(), key=lambda kv: -kv[1][1])[:top]:
        out.append(f"  {cpu:7.1f} CPU-s in {n:3d} processes  {test}")
    return "\n".join(out)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    rest = []
    if "--" in argv:
        at = argv.index("--")
        argv, rest = argv[:at], argv[at + 1:]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--log", required=True, help="the per-process log (appended to)")
    ap.add_argument("--summary-only", action="store_true",
                    help="sum up an existing log, run nothing")
    a = ap.parse_args(argv)
    code = 0
    if not a.summary_only:
        with tempfile.TemporaryDirectory(prefix="wfrl-hook-") as hook:
            with open(os.path.join(hook, "sitecustomize.py"), "w") as f:
                f.write(_HOOK)
            env = dict(os.environ, WFRL_PROCESS_LOG=os.path.abspath(a.log),
                       PYTHONPATH=os.pathsep.join(filter(None, [hook,
                                                                 os.environ.get("PYTHONPATH")])))
            env.pop("PYTEST_CURRENT_TEST", None)       # (when run from a test)
            args = rest or ["-n", "2", "-q", "-p", "no:cacheprovider"]
            code = subprocess.call([sys.executable, "-m", "pytest", *args], env=env)
    if not os.path.exists(a.log):
        print(f"suite_processes.py: error: {a.log}: no such log", file=sys.stderr)
        return 2
    print(summary(read_log(a.log)))
    return code


if __name__ == "__main__":
    sys.exit(main())
