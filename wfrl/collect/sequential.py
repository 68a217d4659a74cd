"""The sequential collector: one env in this process, whole episodes, one buffer row each."""
from __future__ import annotations

import numpy as np

from wfrl.collect.base import EpisodeStats, episode_seeds
from wfrl.envs.base import EP_LEN, OBS_DIM
from wfrl.ppo.policy import IN_DIM, NumpyPolicy
from wfrl.workflow import ComplianceTracker, Workflow


def run_episode(backend, policy: NumpyPolicy, workflow: Workflow, buffer, row: int,
                episode: int, seed: int, lam: float, count_foothold: bool = False,
                greedy: bool = False, weights_version: int = 0) -> EpisodeStats:
    """Play one 100-step episode with `policy` and write it into `buffer` row `row` (if given).

    The obs stored at step t is the one the action was chosen from; red_access stored is red's
    access at that moment (what compliance is judged against); rewards hold env + alignment.
    """
    env_seed, act_seed = episode_seeds(seed, episode)
    rng = np.random.Generator(np.random.PCG64(act_seed))
    backend.seed(env_seed)
    tracker = ComplianceTracker(workflow, lam, count_foothold)
    x = np.empty(IN_DIM, dtype=np.float32)
    x[OBS_DIM:] = workflow.onehot()
    obs, red_access = backend.reset()
    env_return = 0.0
    alignment = 0.0
    for t in range(EP_LEN):
        x[:OBS_DIM] = obs
        action, logp, value = policy.act(x, rng, greedy)
        bonus = tracker.step(action, red_access)
        next_obs, reward, next_access = backend.step(action)
        done = t == EP_LEN - 1
        if done:
            bonus += tracker.finish()
        if buffer is not None:
            buffer.push(row, obs, action, logp, value, reward + bonus, done, red_access)
        env_return += reward
        alignment += bonus
        obs, red_access = next_obs, next_access
    return EpisodeStats(episode=episode, env_return=env_return, alignment=alignment,
                        compliance=tracker.rate, fixes=tracker.fixes,
                        compliant_fixes=tracker.compliant, weights_version=weights_version)


class SequentialCollector:
    """Runs whole episodes one after another on a single backend in this process."""

    def __init__(self, backend, hidden: int, seed: int, lam: float, count_foothold: bool = False):
        self.backend = backend
        self.hidden = hidden
        self.seed = seed
        self.lam = lam
        self.count_foothold = count_foothold

    def collect(self, weights: np.ndarray, version: int, workflow: Workflow, buffer,
                first_episode: int, n_episodes: int) -> list[EpisodeStats]:
        """Fill rows 0..n_episodes-1 of `buffer` (cleared first) with episodes
        first_episode .. first_episode + n_episodes - 1."""
        policy = NumpyPolicy(weights, self.hidden)
        buffer.clear()
        return [run_episode(self.backend, policy, workflow, buffer, i, first_episode + i,
                            self.seed, self.lam, self.count_foothold, weights_version=version)
                for i in range(n_episodes)]

    def close(self):
        self.backend.close()
