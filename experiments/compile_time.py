"""The compile of the core's C file, timed with setup.py's flags and with GCC's two global
common-subexpression passes (-fgcse, -fgcse-after-reload) switched on and off, alternated; and
the passes GCC spends the time in (-ftime-report) for csrc/wfrl_update.h alone.

    .venv/bin/python experiments/compile_time.py [--repeats N] [--out FILE]

Cythonizes csrc/_core.pyx into a temp dir, then compiles the generated C file as setuptools
would (its include dirs and the -O3 flags of setup.py, the pass switches aside).
"""
import argparse
import os
import re
import subprocess
import sys
import sysconfig
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMMON = ["-O3", "-fopenmp-simd", "-ffp-contract=off", "-fno-trapping-math", "-fno-math-errno",
          "-DNDEBUG=1", "-fPIC"]
PASSES_ON = ["-fgcse", "-fgcse-after-reload"]
PASSES_OFF = ["-fno-gcse", "-fno-gcse-after-reload"]


def includes():
    return ["-I" + os.path.join(ROOT, "csrc"), "-I" + sysconfig.get_paths()["include"],
            "-I" + np.get_include()]


def timed(cmd):
    t0, r0 = time.monotonic(), os.times()
    subprocess.run(cmd, check=True, capture_output=True)
    r1 = os.times()
    return time.monotonic() - t0, (r1.children_user - r0.children_user) + \
        (r1.children_system - r0.children_system)


def top_passes(flags, n=4):
    """The n passes GCC spends most time in, compiling wfrl_update.h's functions alone."""
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "u.c")
        with open(src, "w") as f:
            f.write('#include "wfrl_update.h"\n')
        res = subprocess.run(["gcc", *COMMON, *flags, *includes(), "-fkeep-static-functions",
                              "-ftime-report", "-c", src, "-o", os.devnull],
                             capture_output=True, text=True, check=True)
    rows = []
    for line in res.stderr.splitlines():
        m = re.match(r"\s*(.+?)\s*:\s*([\d.]+) \(", line)
        if m and not m.group(1).startswith(("phase", "callgraph", "TOTAL")):
            rows.append((float(m.group(2)), m.group(1)))
    total = re.search(r"TOTAL\s*:\s*([\d.]+)", res.stderr)
    return float(total.group(1)) if total else float("nan"), sorted(rows, reverse=True)[:n]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    lines = []

    def say(text):
        print(text, flush=True)
        lines.append(text)

    with tempfile.TemporaryDirectory() as d:
        c_file = os.path.join(d, "_core.c")
        subprocess.run([sys.executable, "-m", "cython", "-3", "-I", os.path.join(ROOT, "csrc"),
                        os.path.join(ROOT, "csrc", "_core.pyx"), "-o", c_file], check=True,
                       capture_output=True)
        say(f"csrc/_core.pyx cythonized: {os.path.getsize(c_file) / 1e6:.1f} MB of C")
        times = {"gcse on (plain -O3)": [], "gcse off": []}
        for _ in range(a.repeats):
            for name, flags in (("gcse on (plain -O3)", PASSES_ON), ("gcse off", PASSES_OFF)):
                times[name].append(timed(["gcc", *COMMON, *flags, *includes(), "-c", c_file,
                                          "-o", os.path.join(d, "core.o")]))
        for name, ts in times.items():
            say(f"compile of the core, {name}: " + ", ".join(f"{w:.1f} s wall ({c:.1f} CPU-s)"
                                                            for w, c in ts))
    for name, flags in (("gcse on", PASSES_ON), ("gcse off", PASSES_OFF)):
        total, rows = top_passes(flags)
        say(f"wfrl_update.h alone, {name}: {total:.1f} s; slowest passes: " +
            ", ".join(f"{p} {t:.1f} s" for t, p in rows))
    if a.out:
        with open(a.out, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
