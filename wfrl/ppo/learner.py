"""One PPO update on a flat batch (clipped surrogate, value loss, entropy bonus, minibatch epochs,
per-minibatch advantage normalisation, global gradient-norm clipping).

Two implementations of the same update: `update` (the default) and `update_reference` (the
original code path, kept for comparison and held equal to it by tests/test_learner.py). The
default one differs only in how the numbers are computed:

- the policy head (log-softmax, the taken action's ratio, the clipped surrogate, the entropy bonus
  and their gradient with respect to the logits) is one compiled pass (wfrl.ppo.head, C in
  csrc/wfrl_head.h) instead of a dozen torch operations and their autograd backward; the mask
  enters it as the 0/1 array itself. The reference path's masked_fill, and exp of a −1e9
  log-probability (float underflow takes exp's slow path), were half of its time;
- each epoch gathers its shuffled batch once (index_select) and slices minibatches from it,
  instead of fancy-indexing every tensor per minibatch;
- fused Adam and foreach gradient clipping.
The minibatch shuffles draw the same permutations from the learner's generator, so both paths
visit the same minibatches."""
from __future__ import annotations

import numpy as np
import torch

from wfrl.config import PPOConfig  # noqa: F401  (declared in config.py with every setting)
from wfrl.features import MASKED_LOGIT
from wfrl.ppo.batch import Batch
from wfrl.ppo.head import head_loss
from wfrl.ppo.policy import ActorCritic


def _adam(params, lr: float, fused: bool):
    """Adam (eps 1e-5); fused where this torch has a fused CPU kernel (2.4 and later)."""
    params = list(params)
    if fused:
        try:
            return torch.optim.Adam(params, lr=lr, eps=1e-5, fused=True)
        except (RuntimeError, TypeError, ValueError):
            pass
    return torch.optim.Adam(params, lr=lr, eps=1e-5)


STAT_NAMES = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_frac")


class PPOLearner:
    """reference=True: the original update path (update_reference, unfused Adam) for `update`."""

    def __init__(self, cfg: PPOConfig, seed: int = 0, reference: bool = False):
        self.cfg = cfg
        self.reference = reference
        torch.manual_seed(seed)
        self._gen = torch.Generator().manual_seed(seed)
        self.net = cfg.net()
        self.model = ActorCritic(cfg.hidden, self.net.in_dim)
        self.opt = _adam(self.model.parameters(), cfg.lr, fused=not reference)
        self.version = 0
        self.entropy_coef = cfg.entropy_coef
        self.kl_stops = 0   # updates this learner ended early by the KL stop

    def set_progress(self, frac: float) -> None:
        """Move the learning rate and entropy weight along their schedules: frac is the share of
        the run's episodes already trained on (0 at the start, 1 at the end)."""
        frac = min(max(float(frac), 0.0), 1.0)
        cfg = self.cfg
        for g in self.opt.param_groups:
            g["lr"] = cfg.lr * (1.0 + (cfg.lr_final - 1.0) * frac)
        self.entropy_coef = cfg.entropy_coef * (1.0 + (cfg.entropy_final - 1.0) * frac)

    def flat_weights(self) -> np.ndarray:
        return self.model.flat_weights()

    def update(self, batch: Batch, between=None, stale: bool = False) -> dict:
        """One PPO update on `batch`; returns the mean of each statistic over its minibatches.
        between(), if given, runs before every minibatch step (the overlapped trainer gives the
        learner back its threads there once the batch collected meanwhile is in).
        stale: the batch was played by weights older than the learner's (overlap); with
        cfg.decoupled the update then uses the decoupled objective (see proximal_weights). The
        reference path (reference=True) is ordinary PPO only and refuses a stale batch then."""
        if self.reference:
            if stale and self.cfg.decoupled:
                raise ValueError("the reference update has no decoupled objective for a stale batch")
            return self.update_reference(batch)
        cfg = self.cfg
        n = len(batch)
        obs = torch.from_numpy(np.ascontiguousarray(batch.obs, np.float32))
        actions = torch.from_numpy(np.asarray(batch.actions, np.int64))
        old_logp = torch.from_numpy(np.ascontiguousarray(batch.logprobs, np.float32))
        adv_all = torch.from_numpy(np.ascontiguousarray(batch.advantages, np.float32))
        ret_all = torch.from_numpy(np.ascontiguousarray(batch.returns, np.float32))
        masks = (None if batch.masks is None else
                 torch.from_numpy(np.ascontiguousarray(batch.masks).view(np.uint8)))
        weight_all = None
        if stale and cfg.decoupled and n:
            old_logp, weight_all = self.proximal_weights(obs, actions, old_logp, masks)
        mb = max(1, -(-n // cfg.minibatches))
        groups = self.clip_groups()
        stats = []
        for _ in range(cfg.epochs):
            perm = torch.randperm(n, generator=self._gen)
            o, a, lp0, ad, rt = (t.index_select(0, perm)
                                 for t in (obs, actions, old_logp, adv_all, ret_all))
            mk = masks.index_select(0, perm) if masks is not None else None
            wt = weight_all.index_select(0, perm) if weight_all is not None else None
            for start in range(0, n, mb):
                if between is not None:
                    between()
                sl = slice(start, start + mb)
                logits, value = self.model(o[sl])
                adv = ad[sl]
                if adv.numel() > 1:
                    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                if wt is not None:
                    adv = adv * wt[sl]   # w·min(r·A, clip(r)·A) = min(r·wA, clip(r)·wA), w > 0
                # surrogate - entropy bonus and its gradient w.r.t. the logits in one compiled pass
                head, head_stats = head_loss(logits, None if mk is None else mk[sl], a[sl],
                                             lp0[sl], adv, cfg.clip, self.entropy_coef)
                if self.kl_exceeded(float(head_stats[2])):
                    break
                v_loss = 0.5 * (value - rt[sl]).pow(2).mean()
                loss = head + cfg.value_coef * v_loss
                self.opt.zero_grad(set_to_none=True)
                loss.backward()
                for group in groups:
                    torch.nn.utils.clip_grad_norm_(group, cfg.max_grad_norm, foreach=True)
                self.opt.step()
                pg, ent, kl, clip_frac = head_stats
                stats.append((pg, float(v_loss.detach()), ent, kl, clip_frac))   # STAT_NAMES order
            else:
                continue
            break   # the KL stop ends the whole update, not only this epoch
        self.version += 1
        if not stats:
            return dict.fromkeys(STAT_NAMES, 0.0)
        return dict(zip(STAT_NAMES, np.mean(np.asarray(stats, np.float64), axis=0).tolist()))

    def clip_groups(self) -> list:
        """The parameter groups whose gradient norms are clipped: all together, or (clip_per_net)
        the actor's and the critic's apart."""
        if self.cfg.clip_per_net:
            return [list(self.model.actor.parameters()), list(self.model.critic.parameters())]
        return [list(self.model.parameters())]

    def kl_exceeded(self, approx_kl: float) -> bool:
        """The KL early stop (cfg.target_kl > 0): the minibatch's policy, before its step, has
        moved further than 1.5 × target_kl from the one that played the batch."""
        stop = self.cfg.target_kl > 0 and approx_kl > 1.5 * self.cfg.target_kl
        self.kl_stops += stop
        return stop

    # Largest importance weight of a stale step (a guard: one update apart, weights stay near 1).
    MAX_PROXIMAL_WEIGHT = 10.0

    @torch.no_grad()
    def proximal_weights(self, obs, actions, behaviour_logp, masks):
        """Decoupled PPO (Hilton et al. 2021, "Batch size-invariance for policy optimization")
        for a batch played by stale weights: the ratio is clipped against the proximal policy —
        the learner's policy before this update — instead of the behaviour policy, and each step
        is weighted by π_prox(a|s) / π_behav(a|s) (at most MAX_PROXIMAL_WEIGHT). With fresh
        weights the two policies are the same and this is ordinary PPO. Returns (proximal
        log-probabilities, weights)."""
        logits, _ = self.model(obs)
        if masks is not None:
            logits = logits.masked_fill(masks == 0, MASKED_LOGIT)
        prox = torch.log_softmax(logits, dim=-1).gather(1, actions.unsqueeze(1)).squeeze(1)
        weight = (prox - behaviour_logp).exp().clamp(max=self.MAX_PROXIMAL_WEIGHT)
        return prox.contiguous(), weight.contiguous()

    def update_reference(self, batch: Batch) -> dict:
        """The original update path (see the module docstring)."""
        cfg = self.cfg
        obs = torch.as_tensor(batch.obs)
        actions = torch.as_tensor(batch.actions, dtype=torch.int64)
        old_logp = torch.as_tensor(batch.logprobs)
        adv_all = torch.as_tensor(batch.advantages)
        ret_all = torch.as_tensor(batch.returns)
        masked = None if batch.masks is None else ~torch.as_tensor(batch.masks)
        n = len(batch)
        mb = max(1, -(-n // cfg.minibatches))
        groups = self.clip_groups()
        stats = {"policy_loss": 0.0, "value_loss": 0.0, "entropy": 0.0, "approx_kl": 0.0,
                 "clip_frac": 0.0}
        steps = 0
        for _ in range(cfg.epochs):
            perm = torch.randperm(n, generator=self._gen)
            for start in range(0, n, mb):
                idx = perm[start:start + mb]
                logits, value = self.model(obs[idx])
                if masked is not None:  # the same logit the rollout loop gives a masked action
                    logits = logits.masked_fill(masked[idx], MASKED_LOGIT)
                # Categorical log-probabilities and entropy, without torch.distributions'
                # argument checking (a third of the update's time at this network size).
                log_p = torch.log_softmax(logits, dim=-1)
                logp = log_p.gather(1, actions[idx].unsqueeze(1)).squeeze(1)
                adv = adv_all[idx]
                if len(idx) > 1:
                    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                log_ratio = logp - old_logp[idx]
                ratio = log_ratio.exp()
                pg_loss = torch.max(-adv * ratio,
                                    -adv * ratio.clamp(1 - cfg.clip, 1 + cfg.clip)).mean()
                v_loss = 0.5 * (value - ret_all[idx]).pow(2).mean()
                entropy = -(log_p.exp() * log_p).sum(-1).mean()
                with torch.no_grad():
                    approx_kl = ((ratio - 1) - log_ratio).mean().item()
                if self.kl_exceeded(approx_kl):
                    break
                loss = pg_loss + cfg.value_coef * v_loss - self.entropy_coef * entropy
                self.opt.zero_grad(set_to_none=True)
                loss.backward()
                for group in groups:
                    torch.nn.utils.clip_grad_norm_(group, cfg.max_grad_norm)
                self.opt.step()
                with torch.no_grad():
                    stats["policy_loss"] += pg_loss.item()
                    stats["value_loss"] += v_loss.item()
                    stats["entropy"] += entropy.item()
                    stats["approx_kl"] += approx_kl
                    stats["clip_frac"] += ((ratio - 1).abs() > cfg.clip).float().mean().item()
                steps += 1
            else:
                continue
            break
        self.version += 1
        return {k: v / max(steps, 1) for k, v in stats.items()}

    def state(self) -> dict:
        """Everything needed to continue training; loadable with torch.load(weights_only=True)."""
        return {"model": self.model.state_dict(), "optimizer": self.opt.state_dict(),
                "version": self.version, "rng": self._gen.get_state()}

    def load_state(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        if "optimizer" in state:
            self.opt.load_state_dict(state["optimizer"])
        self.version = int(state.get("version", 0))
        if "rng" in state:  # the minibatch shuffles continue exactly where they stopped
            self._gen.set_state(state["rng"])
