"""One visit of a workflow, as a unit of work: its updates with the stop rule, and the
measurement of its final policy.

The serial search (wfrl.search.loop) calls visit_update() once per update and commits after each;
concurrent visits (--concurrent-visits K, wfrl.search.concurrent) run a whole visit with
run_visit() in a worker process or a Ray task. Both number a visit's episodes from its
`first_episode` and cap it at `budget` episodes of the search's budget, so the same visit trains
and measures the same way under either.
"""
from __future__ import annotations

import math
import sys

import numpy as np

from wfrl.rng import EVAL_EPISODE_BASE, episode_block, learner_seed
from wfrl.search.state import Measurement, Visit
from wfrl.training.steps import batch_compliance, behaviour_version, evaluate_policy, log_row
from wfrl.workflow import Workflow


def stop_rule(cfg, episodes: int, compliance: float, updates_since_best: int,
              left: int) -> str | None:
    """Why a visit stops after an update (None: it goes on), from its episodes, its windowed
    compliance, the updates since its best compliance and the budget it has left."""
    if episodes >= cfg.min_episodes and compliance >= cfg.compliance_threshold:
        return "compliant"
    if episodes >= cfg.max_episodes:
        return "max_episodes"
    if updates_since_best >= cfg.patience:
        return "plateau"
    if left <= 0:
        return "budget"
    return None


def visit_update(cfg, steps, learner, visit: Visit, first_episode: int, budget: int,
                 behaviour=None) -> tuple[dict, dict, str | None]:
    """One update of `visit` (changed in place): episodes first_episode + visit.episodes.., at
    most `budget` for the whole visit. Returns its training_log.csv row (Total_Episodes_Sampled:
    the number one past its last episode), the update's statistics and why the visit stops
    (None: it goes on)."""
    wf = Workflow.from_index(visit.workflow)
    per_update = cfg.episodes_per_update
    left = budget - visit.episodes
    n = min(per_update, left, cfg.max_episodes - visit.episodes)
    start = first_episode + visit.episodes
    row_cond = np.tile(wf.onehot(), (per_update, 1))

    def then(eps):
        # This update's stop rule, decided from the batch alone (as below, without changing the
        # visit): the visit's next batch is wanted unless the visit stops here.
        recent = (visit.recent_compliance + [batch_compliance(eps)])[-cfg.compliance_window:]
        compliance = round(float(np.mean(recent)), 4)
        since = 0 if compliance > visit.best_compliance else visit.updates_since_best + 1
        if stop_rule(cfg, visit.episodes + n, compliance, since, left - n) is not None:
            return None
        return wf, start + n, min(per_update, left - n, cfg.max_episodes - visit.episodes - n)

    eps, ustats, t_collect, t_update = steps.step(learner, wf, row_cond, start, n, then=then,
                                                  behaviour=behaviour)
    visit.episodes += n
    visit.updates += 1
    row = log_row(wf, visit.updates, visit.episodes, start + n, eps, ustats, t_collect,
                  t_update, behaviour_version(eps), phase="visit", first_fix=steps.first_fix)
    # A visit's compliance is the mean of its last `compliance_window` updates: one update
    # crossing θ by noise does not make a workflow feasible.
    visit.recent_compliance.append(row["Compliance"])
    visit.recent_compliance = visit.recent_compliance[-cfg.compliance_window:]
    compliance = round(float(np.mean(visit.recent_compliance)), 4)
    visit.last_update = Measurement(row["Env_Reward"], row["Env_Reward_SE"], compliance)
    visit.last_update_episodes = n
    if compliance > visit.best_compliance:
        visit.best_compliance, visit.updates_since_best = compliance, 0
    else:
        visit.updates_since_best += 1
    return row, ustats, stop_rule(cfg, visit.episodes, compliance, visit.updates_since_best,
                                  budget - visit.episodes)


def measure_visit(cfg, steps, collector, learner, visit: Visit, stop: str,
                  eval_backends: dict) -> tuple[bool, int]:
    """The ended visit's outcome, filled into `visit` (stop, evaluation, result, gp_updated):
    returns (complete, evaluation episodes played). complete: the visit trained its minimum and
    its last update was not a stub cut short by the budget (a handful of episodes would enter
    the models as a near-exact observation): the optimizer is told it — the feasibility model
    its compliance, the reward model its reward if compliance reached θ."""
    wf = Workflow.from_index(visit.workflow)
    last = visit.last_update
    assert last is not None
    complete = (visit.episodes >= cfg.min_episodes
                and visit.last_update_episodes
                >= max(2, min(cfg.episodes_per_update, cfg.max_episodes) // 2))
    # How many evaluation episodes the visit's final policy plays: for its compliance
    # (--compliance-eval-episodes), and for its reward when it reached θ (--gp-eval-episodes;
    # without a compliance evaluation "reached θ" is the window's).
    if not complete:
        n_eval = 0
    elif cfg.visit_eval == "greedy":
        n_eval = -1
    elif cfg.compliance_eval_episodes > 0:
        n_eval = max(cfg.compliance_eval_episodes, cfg.gp_eval_episodes)
    else:
        n_eval = cfg.gp_eval_episodes if last.compliance >= cfg.compliance_threshold else 0
    compliance, played = last.compliance, 0
    if n_eval < 0:
        visit.evaluation = greedy_evaluation(cfg, steps, learner, wf, visit.iteration,
                                             eval_backends)
        played = visit.evaluation["n"]
        compliance = visit.evaluation["compliance"]
    elif n_eval:
        # episode numbers reserved for evaluation, distinct per visit, never used by training
        visit.evaluation = evaluate_policy(collector, learner, wf,
                                           episode_block(EVAL_EPISODE_BASE, visit.iteration),
                                           n_eval, cfg.episodes_per_update)
        played = n_eval
        if cfg.compliance_eval_episodes > 0:
            compliance = visit.evaluation["compliance"]
    gp_updated = complete and compliance >= cfg.compliance_threshold
    result = Measurement(last.reward, last.se, compliance)
    if n_eval < 0 or (gp_updated and cfg.gp_eval_episodes > 0):
        assert visit.evaluation is not None   # (n_eval != 0 here: the visit was evaluated)
        result = Measurement(visit.evaluation["reward"], visit.evaluation["se"], compliance)
    visit.stop, visit.result, visit.gp_updated = stop, result, gp_updated
    return complete, played


def greedy_evaluation(cfg, steps, learner, wf, iteration: int, backends: dict) -> dict:
    """--visit-eval greedy: the visit's final policy, greedy, --gp-eval-episodes episodes
    against each red of cfg.eval_reds() (episode numbers reserved for this visit); reward and
    compliance are the means over the reds, the SE that of the mean. backends: red -> backend,
    opened here when missing and kept for the next visit (the caller closes them)."""
    from wfrl.envs import make_backend
    from wfrl.evaluation.returns import play, summarise
    steps.settle()   # a batch collected ahead never interleaves with these episodes
    first = episode_block(EVAL_EPISODE_BASE, iteration)
    per_red = {}
    for red in cfg.eval_reds():
        if red not in backends:
            backends[red] = make_backend(cfg.backend, red, seed=cfg.seed)
        s = summarise(play(backends[red], learner.flat_weights(), cfg.ppo.net(),
                           wf, cfg.alignment_lambda, cfg.count_foothold,
                           range(first, first + cfg.gp_eval_episodes), cfg.seed,
                           greedy=True))
        per_red[red] = {"reward": round(s["mean"], 4), "se": round(s["se"], 4),
                        "compliance": round(s["compliance"], 4), "n": s["n"]}
    k = len(per_red)
    return {"reward": round(float(np.mean([e["reward"] for e in per_red.values()])), 4),
            "se": round(math.sqrt(sum(e["se"] ** 2 for e in per_red.values())) / k, 4),
            "compliance": round(float(np.mean([e["compliance"]
                                               for e in per_red.values()])), 4),
            "n": sum(e["n"] for e in per_red.values()), "per_red": per_red}


def visit_collector_name(cfg, concurrent: int) -> str:
    """The collector each of `concurrent` visits in flight plays with: the search's --collector,
    where `auto` is async only when every visit has two cores of this machine (or of the node a
    Ray task runs on, which reserves what it declares), else sequential."""
    from wfrl.config.run import AUTO_COLLECTOR
    if cfg.collector != AUTO_COLLECTOR:
        return cfg.collector
    import os
    return "async" if (os.cpu_count() or 1) >= 2 * concurrent else "sequential"


# A worker's evaluation backends (red -> backend), kept from one visit to the next as the serial
# search keeps its own (episodes are seeded by their numbers, so which backend object plays them
# changes nothing; building a CybORG backend costs seconds).
_worker_backends: dict = {}


def run_visit(job: dict) -> dict:
    """A whole visit, from its start to its measurement, in this process: what a worker process
    or a Ray task of concurrent visits runs. job: {"config": SearchConfig.to_dict(), "visit":
    the Visit as asked (JSON), "first_episode", "budget", "start": the starting checkpoint's
    payload or None (scratch), "own": whether that is the workflow's own policy (the learner's
    whole state: weights, optimiser and RNG) rather than a parent's weights, "collector"}.
    Returns {"visit": the ended Visit (JSON), "rows": [(log row, update statistics)], "payload":
    the final policy's learner state, "eval_episodes"}. The result depends on the job alone."""
    from wfrl.collect.base import make_collector
    from wfrl.config.run import SearchConfig
    from wfrl.ppo.learner import PPOLearner
    from wfrl.search.state import as_plain, visit_from_json
    from wfrl.training.steps import LearnerSteps
    cfg = SearchConfig.from_dict(job["config"])
    visit = visit_from_json(job["visit"])
    wf = Workflow.from_index(visit.workflow)
    progress = job.get("progress")
    learner = PPOLearner(cfg.ppo, seed=learner_seed(cfg.seed, visit.iteration))
    learner.set_progress(1.0)   # visits train at the end of the pretraining's schedules
    start = job.get("start")
    if start is not None:
        if job.get("own"):
            learner.load_state(start)
        else:
            learner.model.load_state_dict(start["model"])   # weights only; a fresh optimiser
    collector = make_collector(job.get("collector") or cfg.resolved_collector(), cfg.backend,
                               cfg.red_agent, cfg.ppo.net(), cfg.seed, cfg.alignment_lambda,
                               cfg.count_foothold, cfg.n_workers, cfg.episodes_per_update)
    steps = LearnerSteps(collector, cfg.ppo, overlap=cfg.overlap, threads=cfg.learner_threads)
    key = (cfg.backend, cfg.seed)
    if _worker_backends.get("key") != key:
        for backend in _worker_backends.pop("open", {}).values():
            backend.close()
        _worker_backends.update({"key": key, "open": {}})
    backends = _worker_backends["open"]
    rows = []
    with steps.running():
        while True:
            row, ustats, stop = visit_update(cfg, steps, learner, visit, job["first_episode"],
                                             job["budget"])
            rows.append((row, ustats))
            if progress and visit.last_update is not None:
                print(f"  [visit {visit.iteration}] {wf.arrow()} | update {visit.updates:3d} | "
                      f"reward {row['Env_Reward']:8.2f} ± {row['Env_Reward_SE']:5.2f} | "
                      f"compliance {visit.last_update.compliance:.3f}", flush=True,
                      file=sys.stderr)
            if stop is not None:
                break
        complete, played = measure_visit(cfg, steps, collector, learner, visit, stop, backends)
    return {"visit": as_plain(visit), "rows": rows, "complete": complete,
            "payload": learner.state(), "eval_episodes": played}
