"""The training protocol shared by single-workflow training (wfrl.training.run), the search
(wfrl.search.loop) and the exhaustive ground truth (wfrl.search.exhaustive).

One learner step is: the collector plays a batch of episodes with the learner's current weights
(wfrl.collect), the batch is built from its buffer (wfrl.ppo.batch: GAE, flattening) and the
learner makes one PPO update on it (wfrl.ppo.learner). Around that: the evaluation of a trained
policy, the row each update adds to training_log.csv, pretraining on random workflows, and the
checkpoints a run keeps. Episode numbers (hence seeds) of evaluations come from the reserved
ranges in wfrl.rng.
"""
from __future__ import annotations

import contextlib
import threading
import time

import numpy as np

from wfrl.errors import UserError
from wfrl.ppo.batch import to_batch
from wfrl.stats import mean_se
from wfrl.workflow import FIRST_FIX_BONUS, Workflow

LOG_COLUMNS = [
    "Workflow_ID", "Workflow_Order", "Update", "Episodes", "Total_Episodes_Sampled",
    "Env_Reward", "Env_Reward_SE", "Alignment_Bonus", "Total_Reward", "Compliance", "Avg_Fixes",
    "Collection_Time", "Update_Time", "Episodes_Per_Second", "Policy_Loss", "Value_Loss",
    "Entropy", "Approx_KL", "Weights_Version", "Phase",
]
# Columns that hold wall-clock measurements (differ between otherwise identical runs).
TIMING_COLUMNS = ("Collection_Time", "Update_Time", "Episodes_Per_Second")


def first_fix_reward(ppo_cfg, collector) -> float:
    """The reward the learner adds at each episode's first fix: 0 with the first-fix bonus (the
    compiled loop's rule), −λ/2 without it (--no-first-fix-bonus)."""
    return 0.0 if ppo_cfg.first_fix_bonus else -FIRST_FIX_BONUS * float(collector.lam)


def load_teacher(path: str, backend: str):
    """The frozen teacher of --teacher (wfrl.ppo.privileged.Teacher) for a run on `backend`: a
    full-information checkpoint trained on the same CybORG code."""
    from wfrl.evaluation.checkpoint import trained_on_other_code, weights_from_checkpoint
    from wfrl.ppo.privileged import Teacher
    from wfrl.runlog import load_checkpoint
    ck = load_checkpoint(path)
    flat, net = weights_from_checkpoint(ck)
    other = trained_on_other_code(ck, backend)
    if other is not None:
        raise UserError(f"--teacher {path} was trained on {other}, the other CybORG code "
                        f"than this run's {backend}")
    return Teacher(flat, net, path)


def ppo_step(collector, learner, wf, row_cond, first_episode, n, ppo_cfg, teacher=None):
    """Collect n episodes with the learner's current weights, then one PPO update on them.
    Returns (episode stats, update stats, collection seconds, update seconds)."""
    t0 = time.perf_counter()
    eps = collector.collect(learner.flat_weights(), learner.version, wf, first_episode, n,
                            spread=True)
    t1 = time.perf_counter()
    batch = to_batch(collector.buffer, row_cond, ppo_cfg.gamma, ppo_cfg.gae_lambda, ppo_cfg.net(),
                     first_fix=first_fix_reward(ppo_cfg, collector),
                     privileged=ppo_cfg.privileged_critic, teacher=teacher)
    ustats = learner.update(batch)
    return eps, ustats, t1 - t0, time.perf_counter() - t1


class _Background:
    """One collect() call on a daemon thread (a daemon: an interrupted run does not wait for a
    CybORG batch to finish before it exits). The simulator's episodes and the parallel
    collectors' waits run without the GIL, so the learner's update proceeds meanwhile."""

    def __init__(self, fn, *args):
        self.result = self.error = None
        self.seconds = 0.0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(fn, args), daemon=True,
                                        name="wfrl-collect-ahead")
        self._thread.start()

    def _run(self, fn, args):
        t0 = time.perf_counter()
        try:
            self.result = fn(*args)
        except BaseException as exc:  # handed to the thread that waits for the batch
            self.error = exc
        finally:
            self.seconds = time.perf_counter() - t0
            self._done.set()

    def done(self) -> bool:
        return self._done.is_set()

    def join(self, timeout: float | None) -> None:
        self._done.wait(timeout)

    def wait(self):
        self._done.wait()
        if self.error is not None:
            raise self.error
        return self.result


class LearnerSteps:
    """Learner steps (see ppo_step), optionally with the next batch collected while the learner
    updates on the current one (overlap=True).

    step() takes `then`, called with the batch's episode statistics before the update: it returns
    the next batch (workflow, first episode, episodes) when the caller already knows it will want
    one, else None. With overlap, that batch is then collected in the background with the weights
    the learner has *before* this update (one version stale: every episode's weights_version
    says which weights played it, and the learner's update treats such a batch as stale — with
    PPOConfig.decoupled, the decoupled objective; without it, the ratio against the behaviour
    log-probabilities stored with each step). Which batches are collected ahead depends only on
    the episode statistics, so an overlapped run is as deterministic as one without overlap, and a run with
    overlap=False is exactly ppo_step, update after update."""

    def __init__(self, collector, ppo_cfg, overlap: bool = False, threads: int = 1,
                 backend: str = "sim"):
        """threads: torch threads of the learner's update (set for each update and restored
        after; --learner-threads). One by default: the compact update's products are too small
        for a second thread to pay (docs/benchmarks.md), and a learner that spins two OpenMP
        threads on a machine where another process holds a core waits on its own threads
        (docs/learner.md, "Threads")."""
        self.collector, self.ppo_cfg, self.overlap = collector, ppo_cfg, overlap
        # --teacher: loaded once; its distribution is computed with each batch (it is frozen,
        # so a batch built ahead on the collecting thread gets the same labels)
        self.teacher = (None if ppo_cfg.teacher is None else
                        load_teacher(ppo_cfg.teacher, backend))
        self.first_fix = first_fix_reward(ppo_cfg, collector)  # step() adds it; logs count it
        self._ahead: tuple | None = None      # (key, _Background, weights, version, conditioning)
        import torch
        self._torch = torch
        self._learner_threads = max(1, int(threads))
        self._threads: int | None = None    # the torch threads set last

    @property
    def behaviour(self) -> tuple[np.ndarray, int] | None:
        """(flat weights, version) the batch being collected ahead plays with, if any: what a
        resumed run must collect that batch with to continue exactly."""
        return None if self._ahead is None else (self._ahead[2], self._ahead[3])

    def step(self, learner, wf, row_cond, first_episode, n, then=None, behaviour=None):
        """One learner step on episodes first_episode..+n of workflow wf (taken from the batch
        collected ahead when it is that batch). behaviour: (flat weights, version) to collect with
        instead of the learner's (a resumed overlapped run). Returns (episode stats, update
        stats, collection seconds, update seconds); with overlap the collection seconds are the
        background collection's own duration, batch building included (it runs there too), and
        the update seconds the update's alone; without, the update seconds include building the
        batch."""
        key = (wf.index, first_episode, n)
        t0 = time.perf_counter()
        if self._ahead is not None and self._ahead[0] == key:
            job = self._ahead[1]
            eps, batch, prepared = job.wait()   # (interrupted here, abort() still finds it)
            if not np.array_equal(self._ahead[4], row_cond):
                batch = prepared = None   # built for another conditioning: again from the buffer
            self._ahead = None
            t_collect = job.seconds
        else:
            self.cancel()
            weights, version = behaviour or (learner.flat_weights(), learner.version)
            eps = self.collector.collect(weights, version, wf, first_episode, n, spread=True)
            t_collect = time.perf_counter() - t0
            batch = prepared = None
        t1 = time.perf_counter()
        if batch is None:
            batch = self._batch(row_cond)
        nxt = then(eps) if then is not None else None
        if self.overlap and nxt is not None:
            nwf, nfirst, nn = nxt
            weights, version = learner.flat_weights(), learner.version
            # the conditioning every caller gives a batch: its workflow's one-hot on every row
            cond = np.tile(nwf.onehot(), (len(row_cond), 1))
            # the next update's preparation goes with it (PPOLearner.preparer: this learner's
            # generator as it stands before this update, which draws for len(batch) rows)
            self._ahead = ((nwf.index, nfirst, nn),
                           _Background(self._collect_batch, weights, version, nwf, nfirst, nn,
                                       cond, learner.preparer(len(batch))),
                           weights, version, cond)
        stale = behaviour_version(eps) < learner.version if eps else False
        outside = self._torch.get_num_threads()
        self._threads = outside
        try:
            ustats = self._update(learner, batch, stale, prepared)
        finally:
            self._set_threads(outside)
        return eps, ustats, t_collect, time.perf_counter() - t1

    def _batch(self, row_cond):
        """The learner's batch from the episodes in the collector's buffer (to_batch)."""
        cfg = self.ppo_cfg
        return to_batch(self.collector.buffer, row_cond, cfg.gamma, cfg.gae_lambda, cfg.net(),
                        first_fix=self.first_fix, privileged=cfg.privileged_critic,
                        teacher=self.teacher)

    def _collect_batch(self, weights, version, wf, first_episode, n, row_cond, prepare):
        """A batch collected ahead, the learner's batch built from it and the update's
        preparation (prepare, PPOLearner.preparer), all on the same background thread (off the
        learner's path; built before the next collection reuses the buffer)."""
        eps = self.collector.collect(weights, version, wf, first_episode, n)
        batch = self._batch(row_cond)
        return eps, batch, prepare(batch)

    def _update(self, learner, batch, stale: bool, prepared=None) -> dict:
        cfg = self.ppo_cfg
        if self._ahead is None or self._learner_threads == 1:
            self._set_threads(self._learner_threads)
            return learner.update(batch, stale=stale, prepared=prepared)
        # More than one learner thread (--learner-threads N): while the next batch is collected
        # the learner leaves a core to it for the first third of the update's minibatch steps,
        # then takes all N. A fixed share, not "until the batch is in": torch's sums depend on
        # the thread count, so a timing-dependent switch would make runs irreproducible. A
        # third was the fastest share tried (docs/learner.md, "Threads").
        cores = self._learner_threads
        shared = cfg.epochs * cfg.minibatches // 3
        self._set_threads(max(1, cores - 1))
        done = [0]

        def between():
            done[0] += 1
            if done[0] > shared:
                self._set_threads(cores)

        return learner.update(batch, between=between, stale=stale)

    def _set_threads(self, n: int) -> None:
        if n != self._threads:
            self._torch.set_num_threads(n)
            self._threads = n

    def abort(self) -> None:
        """The run is ending on an exception (Ctrl-C, SIGTERM, an error): stop the collector's
        workers at once if a batch is being collected ahead (the parallel collectors' abort())
        rather than wait for the batch; the sequential collector's batch, played in this
        process, is waited for."""
        ahead, self._ahead = self._ahead, None
        if ahead is None:
            return
        abort = getattr(self.collector, "abort", None)
        if abort is not None and not ahead[1].done():
            abort()
        ahead[1].join(timeout=30.0)

    def settle(self) -> None:
        """Wait until the batch being collected ahead, if any, is in (and keep it): before this
        process plays episodes of its own, e.g. an evaluation on an in-process CybORG, whose
        backends share Python's global random module with the collection."""
        if self._ahead is not None:
            self._ahead[1].join(None)

    @contextlib.contextmanager
    def running(self):
        """`with steps.running():` around a loop of step() calls. However the block ends, the
        batch collected ahead is dealt with (aborted on an exception: Ctrl-C, SIGTERM, an error;
        else waited for and dropped) and the collector is closed."""
        try:
            yield self
        except BaseException:
            self.abort()
            raise
        finally:
            self.cancel()
            self.collector.close()

    def cancel(self) -> None:
        """Wait for the batch being collected ahead, if any, and drop it (its episodes are
        collected again when asked for)."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            try:
                ahead[1].wait()
            except Exception:
                pass


def evaluate_policy(collector, learner, wf, first_episode: int, n: int, chunk: int) -> dict:
    """n episodes of the learner's current policy (sampling, as in training) on workflow wf,
    numbered first_episode.., collected `chunk` at a time: mean env return, its standard error and
    mean compliance."""
    returns: list[float] = []
    comps: list[float] = []
    while len(returns) < n:
        k = min(chunk, n - len(returns))
        eps = collector.collect(learner.flat_weights(), learner.version, wf,
                                first_episode + len(returns), k, spread=True)
        returns += [e.env_return for e in eps]
        comps += [e.compliance for e in eps]
    mean, se = mean_se(returns)
    return {"reward": round(mean, 4), "se": round(se, 4),
            "compliance": round(float(np.mean(comps)), 4), "n": len(returns)}


def batch_compliance(eps) -> float:
    """A batch's mean compliance, as its training_log.csv row records it (rounded to 4 places):
    what the stop rules of training and search compare with θ."""
    return round(float(np.mean([e.compliance for e in eps])), 4)


def behaviour_version(eps) -> int:
    """The learner version of the weights that played a batch (Weights_Version in the log)."""
    return max(e.weights_version for e in eps)


def log_row(wf, update, episodes, total_sampled, eps, ustats, t_collect, t_update, version,
            phase: str = "train", first_fix: float = 0.0) -> dict:
    """One training_log.csv row (LOG_COLUMNS) for an update on workflow wf; `version`: the
    learner version of the weights that played the batch (behaviour_version(eps)); first_fix:
    the reward the learner added at each episode's first fix (first_fix_reward), counted into
    the alignment the row reports."""
    env_r, env_se = mean_se([e.env_return for e in eps])
    align = float(np.mean([e.alignment + (first_fix if e.fixes else 0.0) for e in eps]))
    return {
        "Workflow_ID": wf.index, "Workflow_Order": str(wf), "Update": update,
        "Episodes": episodes, "Total_Episodes_Sampled": total_sampled,
        "Env_Reward": round(env_r, 4), "Env_Reward_SE": round(env_se, 4),
        "Alignment_Bonus": round(align, 4), "Total_Reward": round(env_r + align, 4),
        "Compliance": batch_compliance(eps),
        "Avg_Fixes": round(float(np.mean([e.fixes for e in eps])), 3),
        "Collection_Time": round(t_collect, 4), "Update_Time": round(t_update, 4),
        "Episodes_Per_Second": round(len(eps) / max(t_collect, 1e-9), 3),
        "Policy_Loss": round(ustats["policy_loss"], 5),
        "Value_Loss": round(ustats["value_loss"], 5),
        "Entropy": round(ustats["entropy"], 5), "Approx_KL": round(ustats["approx_kl"], 6),
        "Weights_Version": version, "Phase": phase,
    }


# ------------------------------------------------------------------------------ pretraining
PRETRAIN_STREAM = 7  # keys the random stream of pretraining's workflow draws


def pretrain_workflow(seed: int, update: int) -> Workflow:
    """The workflow of pretraining update `update` (0-based): uniform, from the run's seed."""
    return Workflow.from_index(
        int(np.random.default_rng([seed, PRETRAIN_STREAM, update]).integers(120)))


def pretrain(steps: LearnerSteps, learner, seed: int, first_episode: int, done_episodes: int,
             total: int, per_update: int, done_updates: int = 0, behaviour=None,
             until: int | None = None):
    """Generator over pretraining updates (each on a workflow drawn by pretrain_workflow):
    yields (workflow, episodes, episode stats, update stats, collection s, update s) after each;
    continues after `done_updates` updates that used `done_episodes` of `total`, numbering
    episodes from first_episode. The next update's workflow is known in advance, so with overlap
    its batch is collected while this one's update runs. behaviour: see LearnerSteps.step.
    The learner's schedules (--lr-final, --entropy-final) run over the pretraining: each update
    is made at the share of `total` already trained on (no change with both at 1).
    until: stop after the update that reaches this many episodes (the schedules still run over
    `total`), with no batch collected ahead past it: a search's warm-up ends there and the rest
    plays on another collector (--pretrain-warmup)."""
    update = done_updates
    done = done_episodes
    until = total if until is None else min(until, total)
    while done < until:
        learner.set_progress(done / total)
        wf = pretrain_workflow(seed, update)
        n = min(per_update, total - done)
        after = done + n

        def then(_eps, after=after, update=update):
            if after >= until:
                return None
            return pretrain_workflow(seed, update + 1), first_episode + after, \
                min(per_update, total - after)

        cond = np.tile(wf.onehot(), (per_update, 1))
        eps, ustats, t_collect, t_update = steps.step(learner, wf, cond, first_episode + done, n,
                                                      then=then, behaviour=behaviour)
        behaviour = None
        done += n
        update += 1
        yield wf, n, eps, ustats, t_collect, t_update


# ------------------------------------------------------------------------------ checkpoints
def policy_payload(learner, ppo_cfg, workflow: str, workflow_id: int, **extra) -> dict:
    """What a policy checkpoint holds: the learner's state (weights, optimiser, RNG), the network
    it fits, the workflow it was trained on, then `extra` (episodes, config, …)."""
    return state_payload(learner.state(), ppo_cfg, workflow, workflow_id, **extra)


def state_payload(learner_state: dict, ppo_cfg, workflow: str, workflow_id: int,
                  **extra) -> dict:
    """policy_payload from a learner's state (PPOLearner.state()) handed over by another
    process."""
    return {**learner_state, "hidden": ppo_cfg.hidden, "net": ppo_cfg.net().to_dict(),
            "workflow": workflow, "workflow_id": workflow_id, **extra}


def base_payload(learner, ppo_cfg, episodes: int, **extra) -> dict:
    """A pretrained base policy's checkpoint (trained on random workflows; it records the
    balanced workflow as its own)."""
    return policy_payload(learner, ppo_cfg, "balanced", 0, base=True, episodes=episodes, **extra)
