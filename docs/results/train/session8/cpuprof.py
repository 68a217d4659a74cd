"""Run a command; sample CPU time of every descendant process and of each thread of the top one."""
import os, subprocess, sys, time
tck = os.sysconf("SC_CLK_TCK")
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
last = {}
t0 = time.time()
def stat(path):
    with open(path) as f:
        s = f.read()
    comm = s[s.index("(") + 1:s.rindex(")")]
    f = s[s.rindex(")") + 2:].split()
    return comm, int(f[1]), (int(f[11]) + int(f[12])) / tck   # ppid, utime+stime
while p.poll() is None:
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            comm, ppid, cpu = stat(f"/proc/{pid}/stat")
            # descendant?
            q, ok = int(pid), False
            for _ in range(6):
                if q == p.pid: ok = True; break
                q = stat(f"/proc/{q}/stat")[1] if q > 1 else 0
                if q <= 1: break
            if not ok: continue
            last[("proc", pid, comm)] = cpu
            if int(pid) == p.pid:
                for tid in os.listdir(f"/proc/{pid}/task"):
                    c2, _, cpu2 = stat(f"/proc/{pid}/task/{tid}/stat")
                    last[("thr", tid, c2)] = cpu2
        except (OSError, ValueError):
            pass
    time.sleep(0.25)
wall = time.time() - t0
print(f"wall {wall:.1f} rc {p.returncode}")
tot = sum(v for k, v in last.items() if k[0] == "proc")
print(f"total cpu {tot:.1f}")
for k, v in sorted(last.items(), key=lambda kv: -kv[1]):
    if v > 0.3: print(k, round(v, 1))
