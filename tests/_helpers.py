"""Helpers shared by several test modules (pytest puts this directory on sys.path)."""
import subprocess
import time


def perturbed_weights(hidden=32, seed=0):
    """Flat actor-critic weights with noise added, so policies are far from uniform."""
    import torch

    from wfrl.ppo.policy import ActorCritic
    torch.manual_seed(seed)
    m = ActorCritic(hidden)
    with torch.no_grad():
        for p in m.parameters():
            p.add_(torch.randn_like(p) * 0.2)
    return m.flat_weights()


def live_session_processes(sid, wait=10.0):
    """Processes of session `sid` that are still running (zombies waiting to be reaped by init
    have already exited); waits up to `wait` seconds for them to go."""
    deadline = time.time() + wait
    while True:
        ps = subprocess.run(["ps", "-o", "pid=,stat=,cmd=", "--sid", str(sid)],
                            capture_output=True, text=True).stdout.splitlines()
        live = [line for line in ps if line.split()[1][0] != "Z"]
        if not live or time.time() > deadline:
            return live
        time.sleep(0.2)


def collector_rows(names, net, weights, workflow, n_rows, fields=("actions",)):
    """For each collector of `names`: (the env returns of one batch of n_rows episodes of the
    simulator against the mixed red, copies of its buffer's `fields`), same seeds for all."""
    from wfrl.collect.base import make_collector
    rows = {}
    for cname in names:
        c = make_collector(cname, "sim", "mixed", net, 5, 30.0, False, 2, n_rows)
        try:
            stats = c.collect(weights, 1, workflow, 40, n_rows)
            rows[cname] = ([s.env_return for s in stats],
                           [c.buffer.arrays[f].copy() for f in fields])
        finally:
            c.close()
    return rows


def compare_with_reference(backend_name, red, episodes, net, weights, workflow, greedy, seed,
                           exact=("actions", "red_access", "lengths", "obs")):
    """The compiled loop (SimSlots on the simulator, the per-step actor on CybORG) against the
    Python reference loop on the same episodes: the `exact` buffer fields equal, the
    log-probabilities, values and rewards to float rounding, the returns to 1e-3. Returns the
    compiled buffer's arrays."""
    import numpy as np
    import pytest

    from wfrl.collect.buffer import allocate_trajectory, compiled_buffer
    from wfrl.collect.rollout import make_policy, run_episode_reference, run_episodes
    from wfrl.envs import make_backend
    from wfrl.rng import episode_seeds
    be = make_backend(backend_name, red)
    try:
        buf_c = compiled_buffer(allocate_trajectory(len(episodes), 100, net))
        buf_r = compiled_buffer(allocate_trajectory(len(episodes), 100, net))
        stats = run_episodes(be, make_policy(weights, net, workflow, 30.0, greedy=greedy),
                             episodes, seed, buf_c)
        env_seeds, act_seeds = episode_seeds(seed, episodes)
        for k in range(len(episodes)):
            ref, _ = run_episode_reference(be, weights, net, workflow, 30.0, int(env_seeds[k]),
                                           int(act_seeds[k]), greedy=greedy, buffer=buf_r, row=k)
            assert stats[k].env_return == pytest.approx(ref.env_return, abs=1e-3)
            assert stats[k].fixes == ref.fixes
    finally:
        be.close()
    a, b = buf_c.arrays, buf_r.arrays
    for name in exact:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    for name in ("logprobs", "values", "rewards"):
        np.testing.assert_allclose(a[name], b[name], rtol=1e-5, atol=1e-5, err_msg=name)
    return a


def run_wfrl(*args, timeout=600, env=None, cwd=None):
    """`python -m wfrl ARGS...` in a new process, output captured (a fork of this one where it
    can stand for a fresh interpreter: tests/_forked.py)."""
    import _forked
    return _forked.run(args, timeout=timeout, env=env, cwd=cwd)


def popen_wfrl(*args, env=None, cwd=None, **popen_kw):
    """subprocess.Popen([python, -m, wfrl, *args], ...), for a test that signals or kills the
    command mid-run (by a fork of this process where one can stand for a fresh interpreter)."""
    import _forked
    return _forked.popen(args, env=env, cwd=cwd, **popen_kw)


def train_tiny(out, *flags):
    """A 20-episode single-workflow run (critical_first, mixed red, sequential, no periodic
    evaluation) into `out` with extra `flags`; asserts it succeeded."""
    res = run_wfrl("train", "--workflow", "critical_first", "--red-agent", "mixed", *flags,
                   "--collector", "sequential", "--total-episodes", 20,
                   "--episodes-per-update", 10, "--eval-every", 0, "--out", out)
    assert res.returncode == 0, res.stderr
    return out


def assert_batch_reproduces_the_rollout(model, batch):
    """The torch network on the learner batch's input gives the log-probabilities and values the
    compiled loop computed while acting (masked actions excluded)."""
    import numpy as np
    import torch
    with torch.no_grad():
        logits, values = model(torch.as_tensor(batch.obs))
        logits = logits.masked_fill(~torch.as_tensor(batch.masks), -1.0e9)
        logp = torch.log_softmax(logits, -1).gather(
            1, torch.as_tensor(batch.actions, dtype=torch.int64)[:, None])[:, 0]
    np.testing.assert_allclose(logp.numpy(), batch.logprobs, atol=2e-4)
    np.testing.assert_allclose(values.numpy(), batch.values, atol=2e-4)


def session_folder(name):
    """The folder of this test session kept for `name` (made_once and made_in_parts keep their
    parts there; a part that writes files puts them under it too)."""
    import os
    from pathlib import Path
    return Path(os.environ["WFRL_TEST_SESSION_DIR"]) / name


def made_once(name, make):
    """make()'s value, made once per test session and shared by its test processes (pytest -n 2:
    a module fixture is otherwise built in each process that runs one of the module's tests):
    made_in_parts with one part, so the first process to ask makes it and the others wait for it
    and read it."""
    return made_in_parts(name, {name: make})[name]


def made_in_parts(name, parts):
    """{key: make()} for parts = {key: make}, each made once per test session and shared by its
    test processes, the making shared out between them: a process makes every part no other is
    making (a lock it gets at once), then waits for the parts the others are making and reads
    them. Two processes that ask together each make about half."""
    import fcntl
    import os
    import pickle
    folder = session_folder(name)
    folder.mkdir(exist_ok=True)
    out = {}

    def take(i, key, make, wait):
        path = folder / f"{i}.pickle"
        with open(folder / f"{i}.lock", "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except BlockingIOError:
                return
            if path.exists():
                out[key] = pickle.loads(path.read_bytes())
                return
            out[key] = make()
            tmp = path.with_suffix(".tmp")
            tmp.write_bytes(pickle.dumps(out[key]))
            os.replace(tmp, path)

    for wait in (False, True):
        for i, (key, make) in enumerate(parts.items()):
            if key not in out:
                take(i, key, make, wait)
    return out
