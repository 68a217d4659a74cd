"""Interrupt `wfrl train` searches on the sync and async collectors at random moments (SIGINT or
SIGTERM, 0-3 s after the first update) and report each exit; a run still alive 20 s after its
signal is a hang, dumped with py-spy (its threads and its children's).

    python experiments/interrupt_race.py ROUNDS SEED
"""
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

PY = sys.executable
rng = random.Random(int(sys.argv[2]) if len(sys.argv) > 2 else 0)
n = int(sys.argv[1])
hangs = 0
for i in range(n):
    col = rng.choice(["sync", "async"])
    sig = rng.choice([signal.SIGINT, signal.SIGTERM])
    out = tempfile.mkdtemp(prefix="intr")
    p = subprocess.Popen([PY, "-m", "wfrl", "train", "--collector", col, "--n-workers", "2",
                          "--total-episodes", "10000000", "--episodes-per-update", "200", "--out", out],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    line = p.stderr.readline()
    while line and "| update" not in line:
        line = p.stderr.readline()
    time.sleep(rng.uniform(0, 3))
    p.send_signal(sig)
    t0 = time.time()
    try:
        _, err = p.communicate(timeout=20)
        print(i, col, sig.name, "rc", p.returncode, f"{time.time()-t0:.1f}s", flush=True)
        if p.returncode not in (130, 143):
            print("   stderr tail:", err[-1500:], flush=True)
    except subprocess.TimeoutExpired:
        hangs += 1
        print(i, col, sig.name, "HANG", flush=True)
        subprocess.run(["py-spy", "dump", "--pid", str(p.pid)])
        r = subprocess.run(["pgrep", "-s", str(p.pid)], capture_output=True, text=True)
        for pid in r.stdout.split():
            print("--- child", pid, open(f"/proc/{pid}/cmdline").read().replace("\0"," ")[:200])
            subprocess.run(["py-spy", "dump", "--pid", pid])
        os.killpg(p.pid, signal.SIGKILL)
print("hangs", hangs)
