"""What an update on one batch can decide before it starts: the batch as tensors, the columns and
actions its steps can skip (Compact), each minibatch's advantages, and the whole preparation of
an update made ahead on another thread (Prepared)."""
from __future__ import annotations

import copy

import numpy as np
import torch

from wfrl.envs.actions import N_ACTIONS
from wfrl.ppo.batch import Batch


class Compact:
    """The parts of one update's batch the minibatch steps can skip, exactly: the input columns
    that are 0 in every row (20 of the workflow one-hot's 25 when the batch follows one workflow,
    memory and observation bits nothing set) and the actions masked in every row (decoys no host
    in play can carry). A zero column adds exactly 0 to every first-layer product and gets a
    gradient of exactly 0; a masked action's probability is exactly 0 and its logit gets no
    gradient (wfrl.ppo.head). So the steps multiply only the columns and actions in use — on
    recorded default-search batches 87 of 143 columns and 79 of 145 actions, a third of the
    update's arithmetic — and write their gradients back into those columns and rows of the
    full .grad tensors (the rest stay 0, as the full products would make them). The same update
    up to float rounding: the policy head's vector sums run over fewer lanes
    (tests/test_learner.py holds it to the full-width path)."""

    def __init__(self, cols, acts, obs, masks, actions, hidden: int):
        self.cols = torch.from_numpy(cols)
        self.acts = torch.from_numpy(acts)
        self.n_actions = len(acts)
        self.obs = torch.from_numpy(obs)
        self.masks = None if masks is None else torch.from_numpy(masks)
        self.actions = torch.from_numpy(actions)
        nc, na = len(cols), len(acts)
        # the used part of the first layers and the actor's last layer, and their gradients
        self.aw1, self.cw1, self.g_aw1, self.g_cw1 = (torch.empty((hidden, nc)) for _ in range(4))
        self.aw3, self.g_aw3 = torch.empty((na, hidden)), torch.empty((na, hidden))
        self.ab3, self.g_ab3 = torch.empty(na), torch.empty(na)

    @classmethod
    def of(cls, obs: np.ndarray, masks: np.ndarray | None, actions: np.ndarray,
           hidden: int) -> Compact | None:
        """The plan for this batch, or None when every column and every action is in use."""
        cols = np.flatnonzero(obs.any(0))
        acts = (np.arange(N_ACTIONS) if masks is None else
                np.union1d(np.flatnonzero(masks.any(0)), actions))   # (a taken action is in)
        if len(cols) == obs.shape[1] and len(acts) == N_ACTIONS:
            return None
        index = np.full(N_ACTIONS, -1, np.int64)
        index[acts] = np.arange(len(acts))
        return cls(cols.astype(np.int64), acts.astype(np.int64), np.ascontiguousarray(obs[:, cols]),
                   None if masks is None else np.ascontiguousarray(masks[:, acts]),
                   index[actions], hidden)


def minibatch_advantages(adv, weight, sl):
    """The advantages of minibatch `sl`: normalised within it, then (a stale batch under the
    decoupled objective) times each step's proximal weight — w·min(r·A, clip(r)·A) =
    min(r·wA, clip(r)·wA) for w > 0."""
    a = adv[sl]
    if a.numel() > 1:
        a = (a - a.mean()) / (a.std() + 1e-8)
    return a if weight is None else a * weight[sl]


class Prepared:
    """The parts of an update that depend only on its batch and on where the learner's generator
    stands when the update starts, made ahead on the thread that built the batch
    (PPOLearner.preparer) while the learner is still busy with the update before: the batch as
    tensors, the Compact plan, the epochs' permutations, and for every epoch the gathered input
    rows, actions, masks, returns and per-minibatch normalised advantages. An update given one
    uses it only when it fits exactly — the same batch size, epochs, minibatches and plan
    setting, and the learner's generator at state_in (the permutations are then the ones the
    update would draw itself) — and otherwise prepares nothing differently: it draws and gathers
    as before. Either way the same numbers (tests/test_learner.py)."""

    def __init__(self, cfg, compact: bool, batch: Batch, gen_state: torch.Tensor, skip: int):
        n = len(batch)
        self.n, self.epochs, self.minibatches = n, cfg.epochs, cfg.minibatches
        self.hidden, self.compact = cfg.hidden, compact
        g = torch.Generator()
        g.set_state(gen_state)
        for _ in range(cfg.epochs if skip else 0):   # the update before this one draws these
            torch.randperm(skip, generator=g)
        self.state_in = g.get_state()
        perms = [torch.randperm(n, generator=g).numpy() for _ in range(cfg.epochs)]
        self.state_out = g.get_state()
        self.perms = perms
        self.tensors = batch_tensors(batch)
        obs, actions, _, adv_all, ret_all, masks = self.tensors
        self.plan = None
        if compact and n:
            self.plan = Compact.of(obs.numpy(), None if masks is None else masks.numpy(),
                                    actions.numpy(), cfg.hidden)
            if self.plan is not None:
                obs, masks, actions = self.plan.obs, self.plan.masks, self.plan.actions
        self.epoch_rows = []
        for perm in perms:
            o, a, mk = (None if t is None else torch.from_numpy(np.take(t.numpy(), perm, 0))
                        for t in (obs, actions, masks))
            self.epoch_rows.append((o, a, *self._targets(adv_all, ret_all, perm), mk))

    def _targets(self, adv_all: torch.Tensor, ret_all: torch.Tensor, perm) -> tuple:
        """One epoch's gathered returns and per-minibatch normalised advantages."""
        mb = max(1, -(-self.n // self.minibatches))
        ad, rt = (torch.from_numpy(np.take(t.numpy(), perm, 0)) for t in (adv_all, ret_all))
        adn = torch.cat([minibatch_advantages(ad, None, slice(i, i + mb))
                         for i in range(0, self.n, mb)]) if self.n else ad
        return adn, rt

    def with_targets(self, advantages: np.ndarray, returns: np.ndarray) -> Prepared:
        """This preparation for the same rows with other advantages and returns (the privileged
        critic's, computed when the update starts): the gathered inputs, actions, masks, plan and
        permutations are kept, the targets gathered again — what preparing the relabelled batch
        would have made."""
        out = copy.copy(self)
        adv_all, ret_all = (torch.from_numpy(np.ascontiguousarray(t, np.float32))
                            for t in (advantages, returns))
        obs, actions, logp, _, _, masks = self.tensors
        out.tensors = (obs, actions, logp, adv_all, ret_all, masks)
        out.epoch_rows = [(o, a, *self._targets(adv_all, ret_all, perm), mk)
                          for perm, (o, a, _, _, mk) in zip(self.perms, self.epoch_rows)]
        return out

    def fits(self, learner, n: int) -> bool:
        cfg = learner.cfg
        return (n == self.n and cfg.epochs == self.epochs and cfg.minibatches == self.minibatches
                and cfg.hidden == self.hidden and learner.compact == self.compact
                and torch.equal(learner._gen.get_state(), self.state_in))


def batch_tensors(batch: Batch) -> tuple:
    """(obs, actions, behaviour log-probabilities, advantages, returns, masks) of a batch as
    tensors sharing its memory where the dtypes allow."""
    return (torch.from_numpy(np.ascontiguousarray(batch.obs, np.float32)),
            torch.from_numpy(np.asarray(batch.actions, np.int64)),
            torch.from_numpy(np.ascontiguousarray(batch.logprobs, np.float32)),
            torch.from_numpy(np.ascontiguousarray(batch.advantages, np.float32)),
            torch.from_numpy(np.ascontiguousarray(batch.returns, np.float32)),
            None if batch.masks is None else
            torch.from_numpy(np.ascontiguousarray(batch.masks).view(np.uint8)))
