"""The ground truth at the learner's strength (`wfrl exhaustive --protocol recipe`).

One order-conditioned policy per seed is trained with the single-workflow recipe's settings
(memory, mask, 200 episodes per update, learning rate and entropy weight annealed to a tenth, no
first-fix bonus) on random workflows — one drawn per update, as the search pretrains — against the
training red (mixed by default) for `pretrain_episodes` (60,000 by default). Every one of the 120
workflows is then evaluated by conditioning that policy on it: `eval_episodes` greedy episodes of
100 steps against each red of `eval_reds`, on episode numbers reserved for evaluation (the same
episodes for every workflow and every seed, so the comparisons are paired).

Layout of --out (one folder per seed, the combined tables per red beside them):

    seed<N>/experiment_config.json   the settings; a folder is only continued under the same ones
    seed<N>/training_log.csv         one row per update
    seed<N>/train_state.pt           the learner after the last finished update (resume point)
    seed<N>/policy.pt                the trained policy (written once training ends)
    seed<N>/truth.csv                one row per (workflow, red): reward, its SE, compliance
    <red>/exhaustive.csv             the seeds combined (wfrl.search.exhaustive.combine)
    <red>/workflow_effect.json       the workflow × run analysis of that table

An interrupted run continues exactly where it stopped when started again with the same --out:
training from the last finished update (the learner's weights, optimiser and shuffle stream are
in train_state.pt, the workflow and the episodes of each update follow from the seed), the
evaluation from the last (workflow, red) row written.
"""
from __future__ import annotations

import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

from wfrl._version import __version__
from wfrl.collect.base import make_collector
from wfrl.envs import make_backend
from wfrl.envs.base import EP_LEN
from wfrl.errors import UserError
from wfrl.ppo.learner import PPOLearner
from wfrl.rng import EVAL_EPISODE_BASE, learner_seed
from wfrl.runlog import (
    CsvLog,
    load_checkpoint,
    locked_dir,
    read_csv,
    save_checkpoint,
    write_csv_atomic,
    write_json,
)
from wfrl.training.steps import LOG_COLUMNS, LearnerSteps, base_payload, behaviour_version, log_row, pretrain
from wfrl.workflow import all_workflows

TRUTH_COLUMNS = ["Workflow", "Workflow_ID", "Red", "Reward", "Reward_SE", "Compliance", "Fixes",
                 "Episodes"]
# Every seed's policy is evaluated on the same episodes (env and red seeds): the comparisons
# between workflows and between training runs are paired.
EVAL_SEED = 0


def truth(cfg, progress=None) -> dict[str, Path]:
    """Run the recipe protocol for seeds seed .. seed+repeats-1 (each continued where an earlier
    run stopped) and combine them per red; returns {red: combined table path} (with one seed,
    the seed's own per-red tables)."""
    from wfrl.collect.resources import check_workers_fit
    from wfrl.search.exhaustive import combine
    progress = progress or (lambda line: print(line, file=sys.stderr, flush=True))
    cfg = cfg.validate().resolved()
    if cfg.protocol != "recipe":
        raise UserError(f"the ground truth at the learner's strength is --protocol recipe, not "
                        f"{cfg.protocol}")
    check_workers_fit(cfg.resolved_collector(), cfg.backend, cfg.n_workers)
    out = Path(cfg.out)
    reds = cfg.eval_red_list()
    per_red: dict[str, list[Path]] = {r: [] for r in reds}
    if len(reds) > 1:
        per_red[MEAN_OF_REDS] = []
    with locked_dir(out, "ground-truth table"):
        from wfrl.search.concurrent import run_seeds
        subs = [replace(cfg, seed=cfg.seed + k, repeats=1, out=str(out / f"seed{cfg.seed + k}"))
                for k in range(cfg.repeats)]
        for tables in run_seeds(truth_one, truth_result, subs, cfg.concurrent, progress,
                                "ground-truth table"):
            for red, path in tables.items():
                per_red[red].append(path)
        result = {}
        for red, paths in per_red.items():
            (out / red).mkdir(exist_ok=True)
            if len(paths) == 1:
                result[red] = paths[0]
            else:
                progress(f"{red}:")
                result[red] = combine(paths, out / red / "exhaustive.csv", progress)
            a = analyse_runs([p.parent for p in paths], red)
            write_json(out / red / "analysis.json", a)
            progress(f"{red}: {a['sentence']}")
        return result


MEAN_OF_REDS = "mean_of_reds"   # the search's objective: each red's reward, equally weighted


def matrices(seed_dirs, red: str):
    """(rewards, compliance), runs × 120 in workflow-index order, from seed folders' truth.csv;
    red = MEAN_OF_REDS: the mean over the reds each folder was evaluated against."""
    import numpy as np
    rewards, compliance = [], []
    for d in seed_dirs:
        rows = load_truth(Path(d) / "truth.csv")
        reds = sorted({r["Red"] for r in rows}) if red == MEAN_OF_REDS else [red]
        rr, cc = [], []
        for one in reds:
            mine = {r["Workflow_ID"]: r for r in rows if r["Red"] == one}
            if len(mine) != 120:
                raise UserError(f"{d} has {len(mine)} of 120 workflows evaluated against {one}")
            rr.append([mine[i]["Reward"] for i in range(120)])
            cc.append([mine[i]["Compliance"] for i in range(120)])
        rewards.append(np.mean(rr, axis=0))
        compliance.append(np.mean(cc, axis=0))
    return np.array(rewards), np.array(compliance)


def analyse_runs(seed_dirs, red: str) -> dict:
    """wfrl.search.effects.analyse of the seed folders' evaluations against one red."""
    from wfrl.search.effects import analyse
    rewards, compliance = matrices(seed_dirs, red)
    return {"red": red, "seeds": [Path(d).name for d in seed_dirs],
            **analyse(rewards, compliance)}


def check_same_settings(cfg, out: Path) -> None:
    """A folder is only continued under the settings it was started with."""
    from wfrl.search.exhaustive import RUNTIME_ONLY, stored_settings
    stored = stored_settings(out, "a ground-truth run")
    for key, value in asdict(cfg).items():
        if key in RUNTIME_ONLY:
            continue
        if key not in stored or stored[key] != value:
            raise UserError(f"{out} was started with {key} = {stored.get(key)!r}, not {value!r}; "
                            "use the same settings to continue it or another --out")


def truth_result(sub) -> dict[str, Path]:
    """The per-red tables of one seed's finished run (what truth_one returns)."""
    reds = sub.eval_red_list()
    return {red: Path(sub.out) / f"exhaustive_{red}.csv"
            for red in reds + ([MEAN_OF_REDS] if len(reds) > 1 else [])}


def truth_one(cfg, progress) -> dict[str, Path]:
    """One seed's run in cfg.out (locked by the caller): train, evaluate, and write the per-red
    tables seed<N>/exhaustive_<red>.csv."""
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    config = out / "experiment_config.json"
    if config.exists():
        check_same_settings(cfg, out)
    else:
        if any(not p.name.startswith(".") for p in out.iterdir()):
            raise UserError(f"{out} holds files but no experiment_config.json; choose another --out")
        stored = {k: v for k, v in asdict(cfg).items() if k != "out"}   # no machine path
        write_json(config, {"mode": "exhaustive", "wfrl_version": __version__, **stored})
    weights = train_conditioned(cfg, out, progress)
    evaluate_all(cfg, weights, out, progress)
    reds = cfg.eval_red_list()
    return write_red_tables(out, reds + ([MEAN_OF_REDS] if len(reds) > 1 else []))


def train_conditioned(cfg, out: Path, progress):
    """The conditioned policy of one seed (policy.pt once trained; continued from
    train_state.pt after an interruption). Returns its flat weights."""
    policy = out / "policy.pt"
    if policy.exists():
        from wfrl.evaluation.checkpoint import weights_from_checkpoint
        return weights_from_checkpoint(load_checkpoint(policy))[0]
    state_path = out / "train_state.pt"
    learner = PPOLearner(cfg.ppo, seed=learner_seed(cfg.seed))
    done = updates = 0
    log_path = out / "training_log.csv"
    if state_path.exists():
        state = load_checkpoint(state_path)
        learner.load_state(state)
        done, updates = int(state["episodes"]), int(state["updates"])
        # rows of an update whose state was not saved are dropped: it is trained again
        rows = [r for r in read_csv(log_path) if int(r["Update"]) <= updates] \
            if log_path.exists() else []
        write_csv_atomic(log_path, LOG_COLUMNS, rows)
        progress(f"continuing training at {done} of {cfg.pretrain_episodes} episodes")
    log = CsvLog(log_path, LOG_COLUMNS, fresh=not log_path.exists())
    collector = make_collector(cfg.resolved_collector(), cfg.backend, cfg.red_agent,
                               cfg.ppo.net(), cfg.seed, cfg.alignment_lambda, False,
                               cfg.n_workers, cfg.episodes_per_update)
    steps = LearnerSteps(collector, cfg.ppo)
    total = cfg.pretrain_episodes
    t0 = time.perf_counter()
    with steps.running():
        for wf, n, eps, ustats, t_collect, t_update in pretrain(
                steps, learner, cfg.seed, 0, done, total, cfg.episodes_per_update, updates):
            done += n
            updates += 1
            row = log_row(wf, updates, done, done, eps, ustats, t_collect, t_update,
                          behaviour_version(eps), phase="pretrain", first_fix=steps.first_fix)
            log.append(row)
            save_checkpoint(state_path, base_payload(learner, cfg.ppo, done, updates=updates))
            if updates % 25 == 0 or done >= total:
                progress(f"seed {cfg.seed}: {done}/{total} episodes, batch reward "
                         f"{row['Env_Reward']:.2f}, compliance {row['Compliance']:.3f} "
                         f"({time.perf_counter() - t0:.0f} s)")
    save_checkpoint(policy, base_payload(learner, cfg.ppo, total, red_agent=cfg.red_agent,
                                         backend=cfg.backend,
                                         config={"alignment_lambda": cfg.alignment_lambda}))
    return learner.flat_weights()


def evaluate_all(cfg, weights, out: Path, progress) -> None:
    """Every workflow × red of cfg.eval_reds: greedy, EP_LEN steps, cfg.eval_episodes reserved
    episodes; one fsynced row each in truth.csv (rows already there are kept)."""
    from wfrl.evaluation.returns import play, summarise
    path = out / "truth.csv"
    done = set()
    if path.exists():
        done = {(int(r["Workflow_ID"]), r["Red"]) for r in read_csv(path)}
    log = CsvLog(path, TRUTH_COLUMNS, fresh=not path.exists())
    episodes = range(EVAL_EPISODE_BASE, EVAL_EPISODE_BASE + cfg.eval_episodes)
    net = cfg.ppo.net()
    for red in cfg.eval_red_list():
        todo = [wf for wf in all_workflows() if (wf.index, red) not in done]
        if not todo:
            continue
        t0 = time.perf_counter()
        backend = make_backend(cfg.backend, red, seed=EVAL_SEED)
        try:
            for wf in todo:
                s = summarise(play(backend, weights, net, wf, cfg.alignment_lambda, False,
                                   episodes, EVAL_SEED, greedy=True, horizon=EP_LEN))
                log.append({"Workflow": str(wf), "Workflow_ID": wf.index, "Red": red,
                            "Reward": round(s["mean"], 4), "Reward_SE": round(s["se"], 4),
                            "Compliance": round(s["compliance"], 4),
                            "Fixes": round(s["fixes"], 3), "Episodes": s["n"]})
        finally:
            backend.close()
        progress(f"seed {cfg.seed}: {len(todo)} workflows evaluated against {red} "
                 f"({time.perf_counter() - t0:.0f} s)")


def load_truth(path) -> list[dict]:
    """Rows of a truth.csv with numbers parsed."""
    try:
        rows = read_csv(path)
        for r in rows:
            r["Workflow_ID"] = int(r["Workflow_ID"])
            for k in ("Reward", "Reward_SE", "Compliance", "Fixes"):
                r[k] = float(r[k])
    except (OSError, KeyError, ValueError) as exc:
        raise UserError(f"{path} is not a truth.csv ({exc})") from None
    return rows


def write_red_tables(out: Path, reds) -> dict[str, Path]:
    """seed<N>/exhaustive_<red>.csv from truth.csv: the exhaustive table's columns, one red each."""
    import math

    from wfrl.search.exhaustive import COLUMNS
    rows = load_truth(out / "truth.csv")
    paths = {}
    for red in reds:
        many = sorted({r["Red"] for r in rows}) if red == MEAN_OF_REDS else [red]
        by = {one: {r["Workflow_ID"]: r for r in rows if r["Red"] == one} for one in many}
        for one, mine in by.items():
            if len(mine) != 120:
                raise UserError(f"{out / 'truth.csv'} has {len(mine)} of 120 workflows for {one}")
        k = len(many)
        table = [{"Workflow": by[many[0]][i]["Workflow"], "Workflow_ID": i,
                  "Reward": round(sum(by[o][i]["Reward"] for o in many) / k, 4),
                  "Reward_SE": round(math.sqrt(sum(by[o][i]["Reward_SE"] ** 2 for o in many)) / k,
                                     4),
                  "Compliance": round(sum(by[o][i]["Compliance"] for o in many) / k, 4),
                  "Train_Reward": "", "Train_Compliance": "",
                  "Episodes": sum(int(by[o][i]["Episodes"]) for o in many), "Seconds": ""}
                 for i in range(120)]
        paths[red] = out / f"exhaustive_{red}.csv"
        write_csv_atomic(paths[red], COLUMNS, table)
    return paths
