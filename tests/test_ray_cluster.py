"""A real two-node Ray cluster on this machine, run from the wheel: the commands of the cluster
guide (docs/collectors.md, between the cluster-guide markers) with the placeholders filled in,
`wfrl train --collector ray --ray-address` with actors on both nodes, the second node SIGKILLed
mid-run, the run finishing with the exact episode count, and `ray stop` leaving nothing.

Where it runs: Ray 2.60 binds 0.0.0.0 / [::] unless a node's address is literally 127.0.0.1,
and `ray start` rewrites 127.0.0.1 into the machine's external address as soon as a second node
joins (docs/collectors.md, "Keep it off external interfaces"). So the cluster and the driver run
in a network namespace the test creates, with only `lo` in it (no external address to find or
to bind), and in a pid namespace of their own, so that `ray stop`, which kills Ray processes by
name, sees this cluster only and not another Ray on the machine. The namespaces end with their
init process, which the test SIGKILLs by pid at the end."""
import csv
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from test_ray import _listeners, _loopback

from wfrl.collect.ray.local import pid_cmdline
from wfrl.training.steps import TIMING_COLUMNS

pytestmark = [pytest.mark.ray, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "collectors.md"

# pid 1 of the namespaces: brings `lo` up (SIOCGIFFLAGS / SIOCSIFFLAGS), says so, then reaps
# orphans until it is killed (the kernel then kills everything else in its pid namespace).
_INIT = r"""
import fcntl, os, socket, struct, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
flags = struct.unpack("16sH", fcntl.ioctl(s, 0x8913, struct.pack("16sH", b"lo", 0)))[1]
fcntl.ioctl(s, 0x8914, struct.pack("16sH", b"lo", flags | 1))
print("up", flush=True)
while True:
    try:
        os.waitpid(-1, 0)
    except ChildProcessError:
        time.sleep(0.2)
"""


def guide_commands(name: str = "cluster-guide") -> list[str]:
    """The command lines of the guide's block between the `name` markers (comments and blank
    lines left out): cluster-guide, the collector's run; cluster-search, concurrent visits."""
    text = GUIDE.read_text()
    block = text.split(f"<!-- {name}:begin -->", 1)[1].split(f"<!-- {name}:end -->")[0]
    body = block.split("```bash", 1)[1].split("```", 1)[0]
    return [ln.strip() for ln in body.splitlines() if ln.strip() and not ln.startswith("#")]


def guide_lines(name: str) -> list[str]:
    """guide_commands(name), checked to be: the token's export, the head's and the other
    node's `ray start`, the driver's `python -m wfrl`, `ray stop`."""
    lines = guide_commands(name)
    assert [ln.split()[:3] for ln in lines] == [
        ["export", "RAY_AUTH_MODE=token", "RAY_AUTH_TOKEN=<TOKEN>"],
        ["ray", "start", "--head"], ["ray", "start", "--address"],
        ["python", "-m", "wfrl"], ["ray", "stop", "--force"]], lines
    return lines


def guide_env(export: str, values: dict, tmp_path, short: str) -> dict:
    """The environment the guide's lines run in: this one without RAY_ settings, plus the
    guide's export, a fresh $HOME (nothing of Ray's under the real one) and TMPDIR `short`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    for assignment in shlex.split(fill(export, values))[1:]:
        key, _, value = assignment.partition("=")
        env[key] = value
    env["HOME"] = str(tmp_path / "home")
    os.makedirs(env["HOME"])
    env["TMPDIR"] = short
    return env


def wheel_runner(py: str, values: dict):
    """The guide's line, filled, run with the wheel venv: its python, and Ray's CLI through it."""
    def wheel(line):
        line = fill(line, values)
        if line.startswith("ray "):
            return f"{shlex.quote(py)} -m ray.scripts.scripts {line[4:]}"
        assert line.startswith("python ")
        return f"{shlex.quote(py)} {line[7:]}"
    return wheel


def kill_all(pids) -> None:
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass


def stop_and_check_nothing_left(ns, stop_line: str, env: dict, cwd, shm_before: set) -> None:
    """`ray stop` in the namespaces; then no process (hence no socket) of the cluster and no new
    /dev/shm segment (other runs' wfrl- and sem. entries aside)."""
    ns.run(stop_line, env, cwd=str(cwd))
    deadline = time.monotonic() + 20
    while ns.members() and time.monotonic() < deadline:
        time.sleep(0.2)
    left = [(p, pid_cmdline(p)[:80]) for p in ns.members()]
    assert left == [], left
    new_shm = {n for n in set(os.listdir("/dev/shm")) - shm_before
               if not n.startswith(("wfrl-", "sem."))}
    assert not new_shm, new_shm


def fill(line: str, values: dict) -> str:
    out = line
    for key, value in values.items():
        out = out.replace(f"<{key}>", value)
    left = re.findall(r"<[A-Z_]+>", out)
    assert not left, f"unfilled placeholders {left} in {line!r}"
    return out


class Namespaces:
    """A pid + mount + network namespace (with a user namespace when not root) around an init
    process; run() executes a shell command line inside it."""

    def __init__(self):
        user = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
        self.unshare = subprocess.Popen(
            ["unshare", *user, "--pid", "--fork", "--mount-proc", "--net", "--kill-child",
             sys.executable, "-c", _INIT], stdout=subprocess.PIPE, text=True)
        assert self.unshare.stdout.readline().strip() == "up", "the namespace did not start"
        kids = [p for p in _children(self.unshare.pid)]
        assert len(kids) == 1, kids
        self.init = kids[0]
        self.enter = ["nsenter", "-t", str(self.init), "-p", "-m", "-n"] + \
            (["-U", "--preserve-credentials"] if user else [])

    def popen(self, line: str, env: dict, cwd: str, **kw):
        return subprocess.Popen(self.enter + ["--wd=" + cwd, "sh", "-c", line], env=env, **kw)

    def run(self, line: str, env: dict, cwd: str, timeout=120):
        res = subprocess.run(self.enter + ["--wd=" + cwd, "sh", "-c", line], env=env,
                             capture_output=True, text=True, timeout=timeout)
        assert res.returncode == 0, f"{line}\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
        return res

    def members(self) -> list[int]:
        """Live processes in the pid namespace, its init left out."""
        ns = os.readlink(f"/proc/{self.init}/ns/pid")
        out = []
        for d in os.listdir("/proc"):
            if d.isdigit() and int(d) != self.init:
                try:
                    if os.readlink(f"/proc/{d}/ns/pid") == ns and _state(int(d)) not in ("Z", ""):
                        out.append(int(d))
                except OSError:
                    pass
        return out

    def close(self):
        try:
            os.kill(self.init, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.unshare.wait(timeout=30)


def _state(pid) -> str:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def _children(pid) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(d))
            except (OSError, IndexError, ValueError):
                pass
    return out


def _node_processes(temp_dir: str) -> list[int]:
    """Processes of the node whose --temp-dir is temp_dir: those naming it, and descendants."""
    roots = [int(d) for d in os.listdir("/proc") if d.isdigit() and temp_dir in pid_cmdline(d)]
    out, todo = set(), list(roots)
    while todo:
        p = todo.pop()
        if p not in out:
            out.add(p)
            todo.extend(_children(p))
    return sorted(p for p in out if _state(p) not in ("Z", ""))


def _actors(temp_dir: str) -> list[int]:
    return [p for p in _node_processes(temp_dir) if "EpisodeActor" in pid_cmdline(p)]


@pytest.mark.system_wide   # compares /dev/shm before and after
def test_two_node_cluster_from_the_wheel_survives_losing_a_node(wheel_venv, tmp_path):
    export, head, node, train, stop = guide_lines("cluster-guide")

    py = str(wheel_venv.python)
    episodes, per_update = 2000, 100
    short = tempfile.mkdtemp(prefix="wrc")        # unix socket paths must fit 107 bytes
    values = {"TOKEN": os.urandom(32).hex(), "HEAD_IP": "127.0.0.1", "NODE_IP": "127.0.0.1",
              "PORT": str(20000 + os.getpid() % 20000), "CPUS": "1",
              "HEAD_TEMP_DIR": os.path.join(short, "h"), "NODE_TEMP_DIR": os.path.join(short, "n"),
              "WORKERS": "2", "EPISODES": str(episodes), "PER_UPDATE": str(per_update),
              "RUN_DIR": str(tmp_path / "run")}
    env = guide_env(export, values, tmp_path, short)
    wheel = wheel_runner(py, values)

    shm_before = set(os.listdir("/dev/shm"))
    ns = Namespaces()
    run = None
    try:
        with open(f"/proc/{ns.init}/net/dev") as f:
            interfaces = [ln.split(":")[0].strip() for ln in f.read().splitlines()[2:]]
        assert interfaces == ["lo"], interfaces   # no external address inside
        ns.run(wheel(head), env, cwd=str(tmp_path))
        ns.run(wheel(node), env, cwd=str(tmp_path))
        head_procs = _node_processes(values["HEAD_TEMP_DIR"])
        node_procs = _node_processes(values["NODE_TEMP_DIR"])
        assert any("raylet" in pid_cmdline(p) for p in head_procs)
        assert any("raylet" in pid_cmdline(p) for p in node_procs)
        other = [pid_cmdline(p)[:120] for p in head_procs + node_procs
                 if os.path.basename(pid_cmdline(p).split(" ")[0]).startswith("python")
                 and py not in pid_cmdline(p)]
        assert not other, f"a node runs another Python than the wheel venv's: {other}"

        started = time.monotonic()
        run = ns.popen(wheel(train), env, cwd=str(tmp_path), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
        err = []
        for line in run.stderr:                  # until two updates are in
            err.append(line)
            if line.startswith("update    2"):
                break
        assert run.poll() is None, "".join(err)
        head_actors, node_actors = _actors(values["HEAD_TEMP_DIR"]), _actors(values["NODE_TEMP_DIR"])
        assert head_actors and node_actors, (head_actors, node_actors)
        # every listener of the cluster (both nodes, the driver, the actors) is on loopback
        members = ns.members()
        socks = [(p, pid_cmdline(p)[:60], *s) for p in members for s in _listeners(p)]
        assert socks, "found no listening socket"
        assert all(_loopback(addr) for _, _, _, addr, _ in socks), socks
        assert all(str(getattr(addr, "ipv4_mapped", None) or addr) == "127.0.0.1"
                   for _, _, proto, addr, _ in socks if proto.startswith("tcp")), socks

        # the second node goes: its raylet and every process under it, SIGKILLed by pid
        victims = _node_processes(values["NODE_TEMP_DIR"])
        kill_all(victims)
        killed_at = time.monotonic() - started
        out, rest = run.communicate(timeout=240)
        took = time.monotonic() - started
        stderr = "".join(err) + rest
        assert run.returncode == 0, stderr[-3000:]
        assert "Traceback" not in stderr
        summary = json.loads((tmp_path / "run" / "summary.json").read_text())
        assert summary["episodes"] == episodes
        with open(tmp_path / "run" / "training_log.csv", newline="") as f:
            rows = list(csv.DictReader(f))
        counts = [int(r["Total_Episodes_Sampled"]) for r in rows]
        assert len(rows) == episodes // per_update == summary["updates"]
        assert [int(r["Update"]) for r in rows] == list(range(1, len(rows) + 1))
        assert counts == sorted(set(counts)) and counts[-1] == episodes, counts
        assert not any(_state(p) not in ("Z", "") for p in victims)
        print(f"\ncluster run: {took:.1f} s, second node killed at {killed_at:.1f} s")
        stop_and_check_nothing_left(ns, wheel(stop), env, tmp_path, shm_before)
    finally:
        if run is not None and run.poll() is None:
            run.kill()
        ns.close()
        subprocess.run(["rm", "-rf", short])


def _visit_tasks(temp_dir: str) -> list[int]:
    """Processes of the node running a visit (Ray titles a busy worker after its task)."""
    return [p for p in _node_processes(temp_dir) if "ray_run_visit" in pid_cmdline(p)]


@pytest.mark.system_wide   # compares /dev/shm before and after
def test_concurrent_visits_on_two_nodes_survive_losing_one(wheel_venv, tmp_path):
    """The guide's search commands on a two-node loopback cluster (one CPU each) from the wheel:
    the two visits in flight run one on each node; the second node is SIGKILLed mid-visit; the
    search ends with the records of the same search run by local worker processes; `ray stop`
    leaves no process, no /dev/shm segment and no temp dir of the driver's."""
    export, head, node, train, stop = guide_lines("cluster-search")
    assert "--concurrent-visits <K>" in train and "--ray-address" in train

    py = str(wheel_venv.python)
    short = tempfile.mkdtemp(prefix="wrv")
    values = {"TOKEN": os.urandom(32).hex(), "HEAD_IP": "127.0.0.1", "NODE_IP": "127.0.0.1",
              "PORT": str(20000 + (os.getpid() + 7) % 20000), "CPUS": "1",
              "HEAD_TEMP_DIR": os.path.join(short, "h"), "NODE_TEMP_DIR": os.path.join(short, "n"),
              "K": "2", "EPISODES": "6000", "SEED": "4", "RUN_DIR": str(tmp_path / "run")}
    env = guide_env(export, values, tmp_path, short)
    wheel = wheel_runner(py, values)

    # the reference: the same search with the visits in local worker processes
    argv = shlex.split(fill(train, {**values, "RUN_DIR": str(tmp_path / "ref")}))
    at = argv.index("--ray-address")
    t_ref = time.monotonic()
    ref = subprocess.run([py] + argv[1:at] + argv[at + 2:],
                         env={**env, "TMPDIR": str(tmp_path)}, capture_output=True, text=True,
                         timeout=600)
    assert ref.returncode == 0, ref.stderr[-3000:]
    t_ref = time.monotonic() - t_ref

    shm_before = set(os.listdir("/dev/shm"))
    tmp_before = set(os.listdir(tempfile.gettempdir()))
    ns = Namespaces()
    run = None
    try:
        ns.run(wheel(head), env, cwd=str(tmp_path))
        ns.run(wheel(node), env, cwd=str(tmp_path))
        started = time.monotonic()
        run = ns.popen(wheel(train), env, cwd=str(tmp_path), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 240
        on_head = on_node = []
        while time.monotonic() < deadline and run.poll() is None:
            on_head = _visit_tasks(values["HEAD_TEMP_DIR"])
            on_node = _visit_tasks(values["NODE_TEMP_DIR"])
            if on_head and on_node:
                break
            time.sleep(0.05)
        assert run.poll() is None, run.communicate()[1][-3000:]
        assert on_head and on_node, "the two visits in flight did not run one on each node"
        kill_all(_node_processes(values["NODE_TEMP_DIR"]))
        killed_at = time.monotonic() - started
        out, err = run.communicate(timeout=600)
        took = time.monotonic() - started
        assert run.returncode == 0, err[-3000:]
        print(f"\nlocal workers: {t_ref:.1f} s; cluster: {took:.1f} s, second node killed at "
              f"{killed_at:.1f} s")
        assert "Traceback" not in err
        with open(tmp_path / "run" / "gp_sampling_log.csv", newline="") as f:
            got = list(csv.DictReader(f))
        with open(tmp_path / "ref" / "gp_sampling_log.csv", newline="") as f:
            want = list(csv.DictReader(f))
        assert got == want and len(got) >= 3
        logs = []
        for d in ("run", "ref"):
            with open(tmp_path / d / "training_log.csv", newline="") as f:
                logs.append([{k: v for k, v in r.items() if k not in TIMING_COLUMNS}
                             for r in csv.DictReader(f)])
        assert logs[0] == logs[1]
        stop_and_check_nothing_left(ns, wheel(stop), env, tmp_path, shm_before)
        assert sorted(os.listdir(short)) == ["h", "n"]          # the nodes' own, nothing else
        new_tmp = {n for n in set(os.listdir(tempfile.gettempdir())) - tmp_before
                   if n.startswith(("wfrl-ray", "ray"))}
        assert not new_tmp, new_tmp
    finally:
        if run is not None and run.poll() is None:
            run.kill()
        ns.close()
        subprocess.run(["rm", "-rf", short])
