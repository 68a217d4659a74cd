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
