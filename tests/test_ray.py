"""The Ray collector: the sequential collector's batch from Ray actors, a SIGKILLed actor replaced
without losing or changing an episode, and a private local Ray instance that listens on loopback
only, writes only under its temp dir and leaves no process behind (close() and Ctrl-C).

One local Ray instance is shared by the module (a start costs seconds); the tests that need their
own instance (files, exit, SIGINT) run a small driver script in a subprocess."""
import ipaddress
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import pytest
from _helpers import live_session_processes, perturbed_weights

from wfrl.collect.base import make_collector
from wfrl.collect.ray.address import check_ray_address
from wfrl.collect.ray.collector import MAX_REBUILDS, RayCollector
from wfrl.collect.ray.local import Guardian, LocalRay, pid_alive, pid_cmdline, pid_start_time
from wfrl.collect.shm import leaked_segments
from wfrl.errors import BackendUnavailable
from wfrl.workflow import Workflow

pytestmark = pytest.mark.ray  # skipped with the reason by tests/conftest.py when Ray is absent

WF = Workflow.parse("critical_first")
ARGS = ("RedMeanderAgent", 32, 5, 1.5, False)   # red agent, hidden, seed, lambda, count_foothold


def _snapshot(stats, collector):
    return stats, {k: v.copy() for k, v in collector.buffer.arrays.items()}


def _sequential(backend, n, weights, first=7, version=3):
    c = make_collector("sequential", backend, *ARGS, 1, n)
    try:
        return _snapshot(c.collect(weights, version, WF, first, n), c)
    finally:
        c.close()


def _assert_same(a, b):
    (sa, aa), (sb, ab) = a, b
    assert sa == sb                      # EpisodeStats: episode, returns, compliance, version
    for name in ("obs", "actions", "dones", "red_access", "lengths", "logprobs", "values",
                 "rewards"):
        np.testing.assert_array_equal(aa[name], ab[name], err_msg=name)


@pytest.fixture(scope="module")
def local_ray():
    inst = LocalRay()
    try:
        yield inst
    finally:
        inst.shutdown()
    assert not os.path.exists(inst.temp_dir)


# ---------------------------------------------------------------------------------------------
# Listening sockets, from /proc (no psutil needed)

def _hex_addr(text):
    ip, port = text.split(":")
    raw = bytes.fromhex(ip)
    if len(raw) == 4:
        return ipaddress.IPv4Address(raw[::-1]), int(port, 16)
    return ipaddress.IPv6Address(b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))), \
        int(port, 16)


def _listeners(pid):
    """(protocol, address, port) of every TCP socket in LISTEN and every bound UDP socket that
    process `pid` holds."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    out = []
    for proto in ("tcp", "tcp6", "udp", "udp6"):
        with open(f"/proc/{pid}/net/{proto}") as f:
            for line in f.read().splitlines()[1:]:
                p = line.split()
                if p[9] in inodes and (p[3] == "0A" or proto.startswith("udp")):
                    out.append((proto,) + _hex_addr(p[1]))
    return out


def _loopback(addr):
    mapped = getattr(addr, "ipv4_mapped", None)
    return addr.is_loopback or (mapped is not None and mapped.is_loopback)


# ---------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_ray_batch_equals_sequential_on_sim(local_ray):
    n = 37                                       # not a multiple of the workers or the chunk
    wa, wb = perturbed_weights(seed=0), perturbed_weights(seed=1)
    seq_a, seq_b = _sequential("sim", n, wa), _sequential("sim", n, wb, version=4)
    c = RayCollector("sim", *ARGS, n_workers=2, n_rows=n, chunk=8)
    try:
        assert c.local is None                   # joined the module's instance
        assert not c.torch_in_actors             # the actor side of wfrl imports no torch
        _assert_same(seq_a, _snapshot(c.collect(wa, 3, WF, 7, n), c))
        _assert_same(seq_b, _snapshot(c.collect(wb, 4, WF, 7, n), c))   # new weights reach them
        _assert_same(seq_a, _snapshot(c.collect(wa, 3, WF, 7, n), c))
        assert c.rebuilds == 0
        c.rebuilds = MAX_REBUILDS
        with pytest.raises(RuntimeError, match="gave up"):
            c._replace(0)
    finally:
        c.close()


@pytest.mark.slow
def test_ray_actors_carry_the_belief_network(local_ray):
    """A belief network's rows (its belief blocks included) from Ray actors equal the
    sequential collector's."""
    from wfrl.ppo.netspec import NetSpec
    from wfrl.ppo.policy import ActorCritic
    net = NetSpec(hidden=16, memory=True, mask=True, belief=6)
    w = ActorCritic(net.hidden, net.in_dim).flat_weights()
    rows = {}
    for name, kw in (("sequential", {}), ("ray", {"chunk": 4})):
        c = (make_collector("sequential", "sim", "mixed", net, 5, 30.0, False, 1, 10)
             if name == "sequential" else RayCollector("sim", "mixed", net, 5, 30.0, False,
                                                       n_workers=2, n_rows=10, **kw))
        try:
            stats = c.collect(w, 1, WF, 40, 10)
            rows[name] = ([s.env_return for s in stats], c.buffer.arrays["belief"].copy())
        finally:
            c.close()
    assert rows["sequential"][0] == rows["ray"][0]
    np.testing.assert_array_equal(rows["sequential"][1], rows["ray"][1])
    assert rows["ray"][1].any()


@pytest.mark.slow
@pytest.mark.cyborg
def test_ray_batch_equals_sequential_on_cyborg(local_ray):
    w = perturbed_weights()
    seq = _sequential("cyborg", 4, w)
    c = make_collector("ray", "cyborg", *ARGS, 2, 4)
    try:
        _assert_same(seq, _snapshot(c.collect(w, 3, WF, 7, 4), c))
    finally:
        c.close()


class _Killer(threading.Thread):
    """SIGKILLs actor 0 as soon as the first episode has come back: actor 0 is then playing an
    episode (two are in flight per actor)."""

    def __init__(self, collector):
        super().__init__(daemon=True)
        self.c, self.killed = collector, None
        self.start()

    def run(self):
        lengths = self.c.buffer.arrays["lengths"]
        deadline = time.time() + 60
        while time.time() < deadline:
            if (lengths > 0).any() and self.c.pids[0] is not None:
                os.kill(self.c.pids[0], signal.SIGKILL)
                self.killed = self.c.pids[0]
                return
            time.sleep(0.002)


@pytest.mark.slow
@pytest.mark.cyborg
def test_killed_actor_yields_complete_identical_batch(local_ray):
    w = perturbed_weights()
    seq = _sequential("cyborg", 6, w)
    c = RayCollector("cyborg", *ARGS, n_workers=2, n_rows=6)
    try:
        killer = _Killer(c)
        got = _snapshot(c.collect(w, 3, WF, 7, 6), c)
        killer.join()
        assert killer.killed, "no actor was killed"
        assert c.rebuilds >= 1
        assert killer.killed not in c.worker_pids()
        _assert_same(seq, got)
        _assert_same(seq, _snapshot(c.collect(w, 3, WF, 7, 6), c))   # the new actor works on
    finally:
        c.close()
    assert not leaked_segments(os.getpid())


def test_local_instance_listens_on_loopback_only(local_ray):
    c = RayCollector("sim", *ARGS, n_workers=2, n_rows=4)
    try:
        c.collect(perturbed_weights(), 0, WF, 0, 4)
        pids = local_ray.pids()
        assert set(c.worker_pids()) <= set(pids)
        names = {pid: pid_cmdline(pid) for pid in pids}
        assert any("gcs_server" in v for v in names.values())
        assert any("raylet" in v for v in names.values())
        found = {pid: _listeners(pid) for pid in pids + [os.getpid()]}
    finally:
        c.close()
    listeners = [(pid, names.get(pid, "driver")[:40], *sock)
                 for pid, socks in found.items() for sock in socks]
    assert listeners, "found no listening socket at all"
    assert all(_loopback(addr) for _, _, _, addr, _ in listeners), listeners
    assert all(found[pid] for pid in c.pids), "actors should hold their gRPC server socket"


_DRIVER = """
import json, os, signal, sys, time
import numpy as np
from wfrl.collect.ray.collector import RayCollector
from wfrl.collect.ray.local import pid_alive, parent_pids
from wfrl.workflow import Workflow
mode = sys.argv[1]
c = RayCollector("sim", "B_lineAgent", 16, 0, 1.0, n_workers=2, n_rows=256)
from wfrl.ppo.netspec import n_params
w = np.random.default_rng(0).normal(0, 0.1, n_params(16)).astype(np.float32)
info = {"temp_dir": c.local.temp_dir, "session_dir": c.local.session_dir,
        "pids": c.local.pids()}
print(json.dumps(info), flush=True)
code = 0
try:
    version = 0
    while True:
        c.collect(w, version, Workflow.parse("balanced"), 256 * version, 256)
        version += 1
        if version == 2:
            print("collecting", flush=True)
            if mode == "once":
                break
except KeyboardInterrupt:
    code = 130
except SystemExit as exc:          # SIGTERM
    code = exc.code
finally:
    c.close()
kids = [p for p, pp in parent_pids().items() if pp == os.getpid() and pid_alive(p)]
print(json.dumps({"children_after_close": kids,
                  "alive_after_close": [p for p in info["pids"] if pid_alive(p)]}), flush=True)
sys.exit(code)
"""


def _run_driver(tmp_path, mode):
    """Start the driver script in its own session with HOME, TMPDIR and cwd fresh and empty."""
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir()
    cwd.mkdir()
    tmp = tempfile.mkdtemp(prefix="t")          # short: Ray's unix socket paths must fit 107 bytes
    env = {**os.environ, "HOME": str(home), "TMPDIR": tmp}
    proc = subprocess.Popen([sys.executable, "-c", _DRIVER, mode], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    return proc, home, cwd, tmp


def _remove_empty(path):
    if os.path.isdir(path) and not os.listdir(path):
        os.rmdir(path)




@pytest.mark.system_wide   # compares /dev/shm before and after
@pytest.mark.slow
def test_local_instance_writes_only_in_its_temp_dir_and_close_ends_it(tmp_path):
    shm_before = set(os.listdir("/dev/shm"))
    proc, home, cwd, tmp = _run_driver(tmp_path, "once")
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    try:
        assert proc.returncode == 0, err
        lines = out.splitlines()
        info, after = json.loads(lines[0]), json.loads(lines[-1])
        assert info["temp_dir"].startswith(tmp + os.sep)
        assert info["session_dir"].startswith(info["temp_dir"] + os.sep)
        assert len(info["pids"]) >= 4                      # gcs, raylet, agents, actors...
        assert after == {"children_after_close": [], "alive_after_close": []}
        assert live_session_processes(proc.pid) == []
        assert list(home.iterdir()) == []                  # nothing under $HOME (no ~/.ray)
        assert list(cwd.iterdir()) == []
        assert os.listdir(tmp) == []                       # the temp dir is gone
        new_shm = {n for n in set(os.listdir("/dev/shm")) - shm_before
                   if not n.startswith(("wfrl-", "sem."))}   # other runs' segments
        assert not new_shm
    finally:
        _remove_empty(tmp)


@pytest.mark.slow
@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_interrupt_during_collect_leaves_no_ray_process(tmp_path, sig, code):
    """Ctrl-C (SIGINT: KeyboardInterrupt) or SIGTERM (SystemExit(143)) while collecting: the
    driver's clean-up ends every Ray process and removes the temp dir."""
    proc, home, cwd, tmp = _run_driver(tmp_path, "loop")
    try:
        info = json.loads(proc.stdout.readline())
        assert proc.stdout.readline().strip() == "collecting"
        time.sleep(0.3)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    try:
        assert proc.returncode == code, err
        assert json.loads(out.splitlines()[-1]) == {"children_after_close": [],
                                                    "alive_after_close": []}
        live = live_session_processes(proc.pid)
        assert live == [], live
        assert not any(pid_alive(p) for p in info["pids"])
        assert not os.path.exists(info["temp_dir"])
        assert list(home.iterdir()) == []
    finally:
        _remove_empty(tmp)


def test_missing_ray_is_a_one_line_user_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)          # import ray -> ImportError
    with pytest.raises(BackendUnavailable, match=r"pip install 'wfrl\[ray\]'"):
        make_collector("ray", "sim", *ARGS, 2, 4)


# ---------------------------------------------------------------------------------------------
# --ray-address and a lost local node: one line, never a traceback

@pytest.mark.parametrize("text", ["10.0.0.5:6379", "head-node.example.org:1", "[fd00::5]:65535",
                                  "localhost:6379", "127.0.0.1:49152"])
def test_check_ray_address_accepts_host_port(text):
    assert check_ray_address(text) == text


@pytest.mark.parametrize("text,why", [
    ("garbage", "HOST:PORT"), ("", "HOST:PORT"), (":6379", "HOST:PORT"),
    ("10.0.0.5:0", "1..65535"), ("10.0.0.5:65536", "1..65535"), ("10.0.0.5:", "1..65535"),
    ("10.0.0.5:63x", "1..65535"), ("10.0.0.256:6379", "not an IPv4"),
    ("fd00::5:6379", "brackets"), ("[fd00::zz]:6379", "not an IPv6"), ("[fd00::5:6379", "IPv6"),
    ("-bad-.example:6379", "not a hostname"), ("a b:6379", "not a hostname"),
    ("auto", "not supported"), ("ray://10.0.0.5:10001", "Ray Client")])
def test_check_ray_address_refuses_with_one_line(text, why):
    with pytest.raises(ValueError, match=why) as info:
        check_ray_address(text)
    assert "\n" not in str(info.value)


def _one_error_line(stderr):
    """The stderr lines that are not training progress: exactly one 'wfrl: error:' line."""
    lines = [ln for ln in stderr.splitlines()
             if ln.strip() and not ln.startswith(("update ", "evaluation at "))]
    assert "Traceback" not in stderr, stderr
    assert len(lines) == 1 and lines[0].startswith("wfrl: error: "), stderr
    return lines[0]


def test_malformed_ray_address_is_one_line_and_exit_2(tmp_path):
    res = subprocess.run([sys.executable, "-m", "wfrl", "train", "--workflow", "critical_first",
                          "--collector", "ray", "--ray-address", "garbage",
                          "--out", str(tmp_path / "run")], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 2, res.stderr
    assert "--ray-address" in _one_error_line(res.stderr)
    assert not (tmp_path / "run").exists()       # refused before anything started


def test_unreachable_ray_address_is_one_line_and_exit_2(tmp_path):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()                        # nothing listens there now
    t0 = time.monotonic()
    res = subprocess.run([sys.executable, "-m", "wfrl", "train", "--workflow", "critical_first",
                          "--collector", "ray", "--ray-address", f"127.0.0.1:{port}",
                          "--total-episodes", "10", "--out", str(tmp_path / "run")],
                         capture_output=True, text=True, timeout=120)
    took = time.monotonic() - t0
    assert res.returncode == 2, res.stderr
    line = _one_error_line(res.stderr)
    assert f"cannot reach the Ray cluster at 127.0.0.1:{port}" in line
    assert took < 60, took           # not Ray's minutes of retries


_KILL_LOCAL = """
import os, signal, subprocess, sys, time
from wfrl.collect.ray.local import pid_argv, parent_pids, pid_alive
run = subprocess.Popen([sys.executable, "-m", "wfrl", "train", "--workflow", "critical_first",
                        "--backend", "sim", "--collector", "ray", "--n-workers", "2",
                        "--total-episodes", "400000", "--episodes-per-update", "200",
                        "--out", sys.argv[1]], stderr=subprocess.PIPE, text=True)
err = []
for line in run.stderr:
    err.append(line)
    if line.startswith("update    2"):
        break
kids = [p for p, pp in parent_pids().items() if pp == run.pid]
raylet = [p for p in kids if os.path.basename((pid_argv(p) or [""])[0]) == "raylet"]
print(raylet[0] if raylet else -1, flush=True)
if raylet:
    os.kill(raylet[0], signal.SIGKILL)
err.append(run.stderr.read())
sys.stderr.write("".join(err))
sys.exit(run.wait())
"""


@pytest.mark.system_wide   # compares /dev/shm before and after
@pytest.mark.slow
def test_lost_local_instance_ends_the_run_in_one_line(tmp_path):
    """SIGKILL of the private instance's raylet while the run collects (with overlap, the
    default): one 'wfrl: error:' line, a non-zero status, no traceback, no process of the
    instance left, its temp dir removed, nothing new in /dev/shm."""
    shm_before = set(os.listdir("/dev/shm"))
    tmp = tempfile.mkdtemp(prefix="t")            # short: Ray's unix socket paths
    env = {**os.environ, "TMPDIR": tmp}
    proc = subprocess.Popen([sys.executable, "-c", _KILL_LOCAL, str(tmp_path / "run")], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    try:
        assert int(out.split()[0]) > 0, "found no raylet among the run's children"
        assert proc.returncode not in (0, None), err
        line = _one_error_line(err)
        assert "private Ray instance of this run died" in line
        assert "--resume" in line
        assert live_session_processes(proc.pid) == []
        assert not [n for n in os.listdir(tmp) if n.startswith("wfrl-ray-")]   # temp dir gone
        new_shm = {n for n in set(os.listdir("/dev/shm")) - shm_before
                   if not n.startswith(("wfrl-", "sem."))}
        assert not new_shm
    finally:
        shutil.rmtree(tmp, ignore_errors=True)   # torch's compile cache too, if any


def test_guardian_reports_a_node_lost_just_before_the_driver(tmp_path):
    # Ray ends the driver (_exit(1)) at its next object-store call after its raylet dies, often
    # within the guardian's 50-ms poll: the guardian sees the pipe close and the watched process
    # gone at once, and still prints the one line; a driver gone with its node alive: no line.
    import time
    got = {}
    for node_dies in (True, False):
        node = subprocess.Popen(["sleep", "60"])
        log = tmp_path / f"stderr_{node_dies}.txt"
        saved = os.dup(2)
        try:
            started = None
            while started is None:
                started = pid_start_time(node.pid)
            with open(log, "wb") as f:
                os.dup2(f.fileno(), 2)            # the guardian inherits this process's stderr
                try:
                    g = Guardian([(node.pid, started)], None, "the node is gone (test)")
                finally:
                    os.dup2(saved, 2)
            time.sleep(0.3)                       # the guardian is polling
            if node_dies:
                node.kill()
                node.wait()
            g.proc.stdin.close()                  # the driver's end, closed without "closed"
            assert g.proc.wait(timeout=10) == 0
        finally:
            os.close(saved)
            node.kill()
            node.wait()
        got[node_dies] = log.read_text()
    assert got[True] == "wfrl: error: the node is gone (test)\n"
    assert got[False] == ""
