"""The original system's PPO update, kept for comparison (PPOLearner(reference=True),
update_reference): masked_fill and exp of a −1e9 log-probability (float underflow takes exp's
slow path; half its time), the log-softmax, surrogate and entropy as a dozen torch operations,
fancy indexing per minibatch, unfused Adam. Equal to the other paths up to float32 rounding; it
draws the same permutations from the learner's generator, so it visits the same minibatches."""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from wfrl.features import MASKED_LOGIT
from wfrl.ppo.batch import Batch

if TYPE_CHECKING:
    from wfrl.config.run import PPOConfig
    from wfrl.ppo.policy import ActorCritic


class ReferenceUpdate:
    """A mixin of PPOLearner: the original update path."""

    if TYPE_CHECKING:   # what it reads of PPOLearner
        cfg: PPOConfig
        model: ActorCritic
        opt: torch.optim.Adam
        entropy_coef: float
        version: int
        _gen: torch.Generator

        def clip_groups(self) -> list: ...

        def kl_exceeded(self, approx_kl: float) -> bool: ...

    def update_reference(self, batch: Batch) -> dict:
        """The original update path (see this module's docstring)."""
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
