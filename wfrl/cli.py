"""Command line: parse into validated configs and hand over. No training logic lives here.

Every user error ends as one line on stderr and exit status 2, never a traceback.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
import sys

from wfrl.errors import UserError

EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UserError(message)


def _int(text):
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    return v


SEARCH_ONLY = ("max_episodes", "patience", "compliance_window", "beta", "max_evaluations", "pretrain_episodes",
               "inherit", "detrend", "acquisition", "gp_eval_episodes")
TRAIN_ONLY = ("eval_every", "eval_episodes")
RUNTIME_ONLY = ("collector", "n_workers", "ray_address")  # may change on --resume


def _beta(text):
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def _add_train(sub):
    from wfrl.collect.base import COLLECTORS
    from wfrl.config import SearchConfig, TrainConfig
    from wfrl.envs.base import BACKENDS, RED_AGENTS
    from wfrl.ppo.learner import PPOConfig
    d, s, t = PPOConfig(), SearchConfig(), TrainConfig()
    p = sub.add_parser(
        "train", help="search the workflows with GP-UCB (default), or train one with --workflow",
        description="Without --workflow: a GP-UCB search over all 120 workflows (compliance-gated "
                    "PPO on each visited one). With --workflow: train that workflow only. "
                    "Defaults shown as search / single workflow.")
    p.add_argument("--workflow", default=None,
                   help="train only this priority order, e.g. 'defender,enterprise,op_server,"
                        "op_host,user', 'op_server → enterprise → …' or a canonical name")
    p.add_argument("--resume", default=None, metavar="DIR",
                   help="continue the interrupted search in DIR with its stored settings")
    p.add_argument("--backend", default=None, metavar="|".join(BACKENDS),
                   help="environment backend: sim (compiled CAGE2, default) or cyborg (real CybORG)")
    p.add_argument("--collector", default=None, metavar="|".join(COLLECTORS + ("auto",)),
                   help=f"experience collector (default: {s.collector} / {t.collector}; auto = "
                        "async with ≥ 2 cores, else sequential)")
    p.add_argument("--n-workers", type=_int, default=None,
                   help=f"workers of the parallel collectors (default: {s.n_workers})")
    p.add_argument("--ray-address", default=None,
                   help="join this Ray cluster with --collector ray (default: a private local "
                        "Ray instance)")
    p.add_argument("--red-agent", default=None, metavar="|".join(RED_AGENTS),
                   help=f"default: {s.red_agent}")
    p.add_argument("--total-episodes", type=_int, default=None,
                   help=f"episode budget (default: {s.total_episodes} / {t.total_episodes})")
    p.add_argument("--max-episodes", type=_int, default=None,
                   help=f"search: episodes one workflow visit may use (default: {s.max_episodes})")
    p.add_argument("--min-episodes", type=_int, default=None,
                   help="episodes before compliance may stop training "
                        f"(default: {s.min_episodes} / {t.min_episodes})")
    p.add_argument("--episodes-per-update", type=_int, default=None,
                   help=f"default: {s.episodes_per_update} / 200 (recipe; original: "
                        f"{t.episodes_per_update})")
    p.add_argument("--pretrain-episodes", type=_int, default=None,
                   help="search: warm-up episodes before the first visit, one random workflow per "
                        f"update (default: {s.pretrain_episodes}; 0 = none)")
    p.add_argument("--compliance-threshold", type=float, default=None,
                   help=f"θ (default: {s.compliance_threshold})")
    p.add_argument("--alignment-lambda", type=float, default=None,
                   help=f"λ, weight of the alignment reward (default: {s.alignment_lambda})")
    p.add_argument("--patience", type=_int, default=None,
                   help="search: updates without a new best compliance before a visit gives up "
                        f"(default: {s.patience})")
    p.add_argument("--compliance-window", type=_int, default=None, metavar="N",
                   help="search: a visit's compliance is the mean of its last N updates "
                        f"(default: {s.compliance_window})")
    p.add_argument("--beta", type=_beta, default=None,
                   help="search: constant UCB β (default: the GP-UCB schedule, see README)")
    p.add_argument("--inherit", default=None, metavar="base|closest|scratch",
                   help="search: every visit starts from the pretrained base (default), or a "
                        "first visit from the closest trained workflow and a repeated one from "
                        "its own policy, or from scratch")
    p.add_argument("--gp-eval-episodes", type=_int, default=None, metavar="N",
                   help="search: give the GP the mean of N evaluation episodes of a visit's final "
                        "policy instead of its last update's mean (default 0: the last update)")
    p.add_argument("--acquisition", default=None, metavar="constrained|ucb|random|original",
                   help="search: constrained (default: GP-UCB of reward x probability of "
                        "reaching θ), ucb (reward only), random (uniformly among the unvisited: "
                        "the control), original (the original system's rule)")
    p.add_argument("--detrend", dest="detrend", action=argparse.BooleanOptionalAction,
                   default=None,
                   help="search: regress out how long each policy's ancestry trained before "
                        "the GP models the rewards (default off; for --inherit closest)")
    p.add_argument("--max-evaluations", type=_int, default=None,
                   help="search: stop after this many workflow visits (default: budget only)")
    p.add_argument("--count-foothold", action="store_true", default=None,
                   help="count red's permanent User0 foothold as compromised (original rule)")
    p.add_argument("--eval-every", type=_int, default=None, metavar="N",
                   help="with --workflow: evaluate the greedy policy every N training episodes on "
                        "reserved episodes and keep the best as best.pt (0: never; recipe: 5000, "
                        "original: 0)")
    p.add_argument("--eval-episodes", type=_int, default=None,
                   help=f"with --workflow: episodes of each periodic evaluation (default: {t.eval_episodes})")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--out", default=None, help="run directory (default: runs/latest)")
    p.add_argument("--force", action="store_true", default=None,
                   help="replace a run already in --out")
    g = p.add_argument_group("PPO")
    g.add_argument("--ppo-preset", default=None, metavar="recipe|original",
                   help="starting point for the learner settings, overridden by the flags given: "
                        "recipe (default: 200 episodes per update with --workflow, memory, mask, "
                        "periodic evaluation) or original (the original system: 10 episodes per "
                        "update, observation only)")
    g.add_argument("--lr", type=float, default=None, help=f"default: {d.lr}")
    g.add_argument("--gamma", type=float, default=None, help=f"default: {d.gamma}")
    g.add_argument("--gae-lambda", type=float, default=None, help=f"default: {d.gae_lambda}")
    g.add_argument("--clip", type=float, default=None, help=f"default: {d.clip}")
    g.add_argument("--epochs", type=_int, default=None, help=f"default: {d.epochs}")
    g.add_argument("--minibatches", type=_int, default=None, help=f"default: {d.minibatches}")
    g.add_argument("--entropy-coef", type=float, default=None, help=f"default: {d.entropy_coef}")
    g.add_argument("--value-coef", type=float, default=None, help=f"default: {d.value_coef}")
    g.add_argument("--max-grad-norm", type=float, default=None, help=f"default: {d.max_grad_norm}")
    g.add_argument("--hidden", type=_int, default=None, help=f"default: {d.hidden}")
    g.add_argument("--memory", action=argparse.BooleanOptionalAction, default=None,
                   help="add the defender's memory block (seen scans, compromises since my last "
                        "restore, my restores and decoys, time) to the policy input (recipe: on, "
                        "original: off)")
    g.add_argument("--mask", action=argparse.BooleanOptionalAction, default=None,
                   help="never choose actions that cannot do anything: Monitor, decoys a host "
                        "cannot carry or already has (recipe: on, original: off)")
    g.add_argument("--lr-final", type=float, default=None,
                   help="with --workflow: learning rate at the end of the run, as a fraction of "
                        "--lr (linear; default 1: constant)")
    g.add_argument("--entropy-final", type=float, default=None,
                   help="with --workflow: entropy weight at the end of the run, as a fraction of "
                        "--entropy-coef (linear; default 1: constant)")


PPO_FLAGS = ("lr", "gamma", "gae_lambda", "clip", "epochs", "minibatches", "entropy_coef",
             "value_coef", "max_grad_norm", "hidden", "memory", "mask", "lr_final", "entropy_final")


def _add_exhaustive(sub):
    from wfrl.envs.base import BACKENDS, RED_AGENTS
    from wfrl.search.exhaustive import ExhaustiveConfig
    e = ExhaustiveConfig()
    p = sub.add_parser("exhaustive", help="train and evaluate all 120 workflows under one "
                                          "protocol (the search's ground truth)")
    p.add_argument("--red-agent", default=e.red_agent, metavar="|".join(RED_AGENTS))
    p.add_argument("--protocol", default=e.protocol, metavar="finetune|conditioned",
                   help="finetune (default): each workflow trains from a pretrained base; "
                        "conditioned: one order-conditioned policy, evaluated on each workflow")
    p.add_argument("--pretrain-episodes", type=_int, default=None,
                   help="finetune: episodes of the search's pretraining that give the base every "
                        "workflow starts from (0: from scratch; default 10000); conditioned: "
                        "training episodes of the conditioned policy (default 40000)")
    p.add_argument("--episodes-per-workflow", type=_int, default=e.episodes_per_workflow)
    p.add_argument("--episodes-per-update", type=_int, default=None,
                   help="default: 200 with the recipe preset, 50 with original")
    p.add_argument("--eval-episodes", type=_int, default=e.eval_episodes)
    p.add_argument("--alignment-lambda", type=float, default=e.alignment_lambda)
    p.add_argument("--backend", default=e.backend, metavar="|".join(BACKENDS))
    p.add_argument("--collector", default=e.collector)
    p.add_argument("--n-workers", type=_int, default=e.n_workers)
    p.add_argument("--seed", type=int, default=e.seed)
    p.add_argument("--repeats", type=_int, default=e.repeats,
                   help="training runs per workflow (seeds seed, seed+1, …), combined into one "
                        "table whose standard errors include training randomness")
    p.add_argument("--out", default=e.out, help="directory for exhaustive.csv (an unfinished "
                                                "table there is continued)")
    p.add_argument("--ppo-preset", default=None, metavar="recipe|original",
                   help="learner settings: recipe (default: memory, mask, 200 episodes per "
                        "update unless --episodes-per-update is given) or original (observation "
                        "only, 50 episodes per update)")


def _add_eval(sub):
    from wfrl.envs.base import BACKENDS, RED_AGENTS
    p = sub.add_parser("eval", help="evaluate a checkpoint (greedy and sampling policy), or run "
                                     "the CAGE2 evaluation protocol with --cage2")
    p.add_argument("--checkpoint", default=None,
                   help="checkpoint file, or pretrained:NAME for a policy shipped with wfrl")
    p.add_argument("--cage2", action="store_true",
                   help="the CAGE Challenge 2 protocol: 30-, 50- and 100-step episodes against "
                        "B_lineAgent, RedMeanderAgent and SleepAgent, leaderboard-style table")
    p.add_argument("--checkpoint-b-line", default=None,
                   help="--cage2: the policy that plays B_lineAgent (default: --checkpoint)")
    p.add_argument("--checkpoint-meander", default=None,
                   help="--cage2: the policy that plays RedMeanderAgent (default: --checkpoint)")
    p.add_argument("--sampling", action="store_true",
                   help="--cage2: sample actions instead of taking the greedy (argmax) action")
    p.add_argument("--n-workers", type=_int, default=None,
                   help="--cage2: evaluation processes (default: 2 on cyborg, 1 on sim)")
    p.add_argument("--backend", default="sim", metavar="|".join(BACKENDS))
    p.add_argument("--red-agent", default="B_lineAgent", metavar="|".join(RED_AGENTS))
    p.add_argument("--episodes", type=_int, default=None,
                   help="episodes per policy mode (default 100), with --cage2 per setting "
                        "(default 1000)")
    p.add_argument("--seed", type=int, default=None,
                   help="seed of the evaluation episodes (default 12345; --cage2: 153)")
    p.add_argument("--workflow", default=None,
                   help="condition on this workflow instead of the checkpoint's")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object: mean, se, n, compliance of the greedy policy, "
                        "and the same under 'sampling'")


def _add_parity(sub):
    from wfrl.parity import BLUE_POLICIES
    p = sub.add_parser("parity", help="compare the compiled simulator with the real CybORG")
    p.add_argument("--red-agent", default="B_lineAgent", metavar="B_lineAgent|RedMeanderAgent")
    p.add_argument("--blue", default="sleep", metavar="|".join(BLUE_POLICIES),
                   help="built-in blue policy played on both backends (default: sleep)")
    p.add_argument("--episodes", type=_int, default=300, help="CybORG episodes (default: 300)")
    p.add_argument("--sim-episodes", type=_int, default=None,
                   help="simulator episodes (default: max(episodes, 3000))")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true",
                   help="print one JSON object: sim, cyborg ({mean, se, n}), diff, equivalent")


def _add_bench(sub):
    from wfrl.envs.base import BACKENDS, RED_AGENTS
    p = sub.add_parser("bench", help="measure wfrl's throughput")
    what = p.add_subparsers(dest="what", required=True, parser_class=_Parser)
    c = what.add_parser("collectors", help="every collector on the same workload, with the bare "
                                           "environment rate measured in the same run")
    c.add_argument("--backend", default="sim", metavar="|".join(BACKENDS))
    c.add_argument("--red-agent", default="B_lineAgent", metavar="|".join(RED_AGENTS))
    c.add_argument("--n-workers", type=_int, default=2)
    c.add_argument("--episodes", type=_int, default=None,
                   help="episodes per collector (default: 2000 on sim, 40 on cyborg)")
    c.add_argument("--json", action="store_true",
                   help="print a JSON list, one object per collector: collector, episodes_per_s, "
                        "steps_per_s, efficiency (and n_workers, startup_s, worker_rss_mb)")
    q = what.add_parser("search", help="search quality on planted ground truths: every "
                                       "acquisition on synthetic problems with known answers")
    q.add_argument("--planted", action="store_true",
                   help="synthetic objectives over the 120 workflows (pairwise-order and "
                        "position effects, feasibility by order constraints, noisy visits)")
    q.add_argument("--instances", type=_int, default=5, help="random problem instances (default 5)")
    q.add_argument("--seeds", type=_int, default=20, help="optimizer runs per instance and "
                                                          "acquisition (default 20)")
    q.add_argument("--out", default=None, help="also write every run's record to this JSON file")
    q.add_argument("--json", action="store_true", help="print the summary as one JSON object")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="wfrl", description="workflow-conditioned PPO for CAGE Challenge 2")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    _add_train(sub)
    _add_exhaustive(sub)
    _add_eval(sub)
    _add_parity(sub)
    _add_bench(sub)
    return parser


def _given(a, names) -> dict:
    return {n: getattr(a, n) for n in names if getattr(a, n, None) is not None}


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _cmd_train(a) -> int:
    import dataclasses

    from wfrl.config import SearchConfig, TrainConfig
    from wfrl.ppo.learner import PPOConfig
    settings = [f.name for f in dataclasses.fields(SearchConfig) if f.name != "ppo"]
    settings += [f.name for f in dataclasses.fields(TrainConfig)
                 if f.name not in settings and f.name != "ppo"]
    given = _given(a, settings)
    ppo_given = _given(a, PPO_FLAGS)
    if a.resume is not None and a.ppo_preset is not None:
        raise UserError("--resume continues with the run's stored settings; --ppo-preset cannot "
                        "be changed")
    if a.resume is None:
        from wfrl.config import DEFAULT_PRESET, preset_settings
        run_preset, ppo_preset = preset_settings(a.ppo_preset or DEFAULT_PRESET)
        ppo_given = {**ppo_preset, **ppo_given}
        if a.workflow is not None:  # the search keeps its own update size and has no evaluation
            given = {**run_preset, **given}
    if a.resume is not None:
        from wfrl.search.loop import resume_config, search
        fixed = [k for k in list(given) + list(ppo_given) if k not in RUNTIME_ONLY]
        if fixed:
            raise UserError(f"--resume continues with the run's stored settings; {_flag(fixed[0])}"
                            f" cannot be changed (only {', '.join(map(_flag, RUNTIME_ONLY))})")
        search(resume_config(a.resume, _given(a, RUNTIME_ONLY)), resume=True)
        return 0
    if a.workflow is not None:
        from wfrl.train import train
        bad = [k for k in SEARCH_ONLY if k in given]
        if bad:
            raise UserError(f"{_flag(bad[0])} belongs to the workflow search; it does not apply "
                            "with --workflow")
        train(TrainConfig(**given, ppo=PPOConfig(**ppo_given)).validate())
        return 0
    from wfrl.search.loop import search
    bad = [k for k in TRAIN_ONLY if k in given]
    if bad:
        raise UserError(f"{_flag(bad[0])} applies to single-workflow training (--workflow)")
    cfg = SearchConfig(**{k: v for k, v in given.items() if k != "workflow"},
                       ppo=PPOConfig(**ppo_given))
    search(cfg.validate())
    return 0


def _cmd_exhaustive(a) -> int:
    from wfrl.config import DEFAULT_PRESET, preset_settings
    from wfrl.ppo.learner import PPOConfig
    from wfrl.search.exhaustive import ExhaustiveConfig, exhaustive
    preset = a.ppo_preset or DEFAULT_PRESET
    run_preset, ppo_preset = preset_settings(preset)
    per_update = a.episodes_per_update
    if per_update is None:
        per_update = run_preset["episodes_per_update"] if preset == "recipe" else \
            ExhaustiveConfig.episodes_per_update
    exhaustive(ExhaustiveConfig(
        red_agent=a.red_agent, protocol=a.protocol, episodes_per_workflow=a.episodes_per_workflow,
        pretrain_episodes=a.pretrain_episodes, ppo=PPOConfig(**ppo_preset),
        episodes_per_update=per_update, eval_episodes=a.eval_episodes,
        alignment_lambda=a.alignment_lambda, backend=a.backend, collector=a.collector,
        n_workers=a.n_workers, seed=a.seed, repeats=a.repeats, out=a.out).validate())
    return 0


def _cmd_eval_cage2(a) -> int:
    from wfrl.cage2_eval import cage2_evaluate, format_table
    if a.seed is not None and a.seed < 0:
        raise UserError(f"--seed must be non-negative (got {a.seed})")
    if a.n_workers is not None and a.n_workers < 1:
        raise UserError(f"--n-workers must be positive (got {a.n_workers})")
    cks = {"all": a.checkpoint, "b_line": a.checkpoint_b_line, "meander": a.checkpoint_meander}
    if not any(cks.values()):
        raise UserError("--cage2 needs --checkpoint (or --checkpoint-b-line and --checkpoint-meander)")
    res = cage2_evaluate(cks, backend=a.backend, episodes=1000 if a.episodes is None else a.episodes,
                         seed=153 if a.seed is None else a.seed, n_workers=a.n_workers,
                         greedy=not a.sampling, workflow=a.workflow,
                         progress=None if a.json else (lambda line: print(line, file=sys.stderr,
                                                                            flush=True)))
    print(json.dumps(res) if a.json else format_table(res))
    return 0


def _cmd_eval(a) -> int:
    from wfrl.config import EvalConfig
    from wfrl.evaluate import evaluate
    if a.cage2:
        return _cmd_eval_cage2(a)
    for flag in ("checkpoint_b_line", "checkpoint_meander", "sampling", "n_workers"):
        if getattr(a, flag):
            raise UserError(f"{_flag(flag)} goes with --cage2")
    if a.checkpoint is None:
        raise UserError("eval needs --checkpoint")
    res = evaluate(EvalConfig(checkpoint=a.checkpoint, backend=a.backend, red_agent=a.red_agent,
                              episodes=100 if a.episodes is None else a.episodes,
                              seed=12345 if a.seed is None else a.seed, workflow=a.workflow))
    if a.json:
        g = res["greedy"]
        print(json.dumps({"mean": g["mean"], "se": g["se"], "n": g["n"],
                          "compliance": g["compliance"], "policy": "greedy",
                          "sampling": res["sampling"], "workflow": res["workflow"],
                          "backend": res["backend"], "red_agent": res["red_agent"]}))
    else:
        print(f"workflow {res['workflow']} on {res['backend']} vs {res['red_agent']}")
        for mode in ("greedy", "sampling"):
            s = res[mode]
            print(f"  {mode:8s} return {s['mean']:9.2f} ± {s['se']:.2f} (n={s['n']})  "
                  f"compliance {s['compliance']:.3f}  fixes/episode {s['fixes']:.2f}")
    return 0


def _cmd_parity(a) -> int:
    from wfrl.envs.base import check_red_agent
    from wfrl.parity import check_blue_policy, parity
    check_red_agent(a.red_agent, allow_mixed=False)
    check_blue_policy(a.blue)
    if a.episodes < 2 or (a.sim_episodes is not None and a.sim_episodes < 2):
        raise UserError("--episodes and --sim-episodes must be at least 2")
    res = parity(a.red_agent, a.blue, a.episodes, a.sim_episodes or max(a.episodes, 3000), a.seed)
    if a.json:
        print(json.dumps({k: res[k] for k in ("sim", "cyborg", "diff", "equivalent", "margin",
                                              "diff_se", "p", "red_agent", "blue")}))
    else:
        s, c = res["sim"], res["cyborg"]
        print(f"{a.blue} blue vs {a.red_agent}, mean 100-step return ± s.e.")
        print(f"  sim     {s['mean']:9.2f} ± {s['se']:.2f} (n={s['n']})")
        print(f"  cyborg  {c['mean']:9.2f} ± {c['se']:.2f} (n={c['n']})")
        print(f"  diff    {res['diff']:+9.2f} ± {res['diff_se']:.2f}; margin ±{res['margin']:.2f}")
        verdict = "equivalent" if res["equivalent"] else "NOT shown equivalent"
        print(f"  TOST (alpha 0.05): {verdict} (p = {res['p']:.3g})")
    return 0


def _cmd_bench_search(a) -> int:
    from wfrl.search.planted import format_planted, run_planted
    if not a.planted:
        raise UserError("wfrl bench search needs --planted (the real-data quality benchmark is "
                        "bench/test_bench_search.py)")
    for name in ("instances", "seeds"):
        if getattr(a, name) < 1:
            raise UserError(f"--{name} must be positive (got {getattr(a, name)})")
    res = run_planted(range(a.instances), range(a.seeds),
                      progress=None if a.json else (lambda line: print(line, flush=True)))
    if a.out:
        from wfrl.runlog import write_json
        write_json(Path(a.out), res)
    if a.json:
        print(json.dumps({k: v for k, v in res.items() if k != "runs"}))
    else:
        print(format_planted(res))
    return 0


def _cmd_bench(a) -> int:
    if a.what == "search":
        return _cmd_bench_search(a)
    from wfrl.benchmarks import bench_collectors
    from wfrl.envs import make_backend
    from wfrl.envs.base import check_backend, check_red_agent
    check_backend(a.backend)
    check_red_agent(a.red_agent)
    if a.n_workers < 1:
        raise UserError(f"--n-workers must be positive (got {a.n_workers})")
    episodes = a.episodes or (40 if a.backend == "cyborg" else 2000)
    if episodes < 1:
        raise UserError(f"--episodes must be positive (got {episodes})")
    make_backend(a.backend, a.red_agent).close()  # a missing extra fails here, in one line

    def show(row):
        if not a.json:
            rss = f", worker RSS {row['worker_rss_mb']} MB" if row.get("worker_rss_mb") else ""
            print(f"  {row['collector']:10s} x{row['n_workers']}: {row['episodes_per_s']:10.1f} "
                  f"episodes/s {row['steps_per_s']:12.0f} steps/s  efficiency "
                  f"{row['efficiency']:.3f}  (start-up {row['startup_s']:.1f} s{rss})", flush=True)

    if not a.json:
        print(f"{a.backend} vs {a.red_agent}, {episodes} episodes per collector")
    res = bench_collectors(a.backend, a.n_workers, episodes, a.red_agent, progress=show)
    if a.json:
        print(json.dumps(res))
    else:
        b = res[0]
        print(f"  bare env   x1: {b['episodes_per_s']:10.1f} episodes/s {b['steps_per_s']:12.0f} "
              f"steps/s (reference)")
    return 0


def main(argv=None) -> int:
    try:
        args = build_parser().parse_args(argv)
        commands = {"train": _cmd_train, "exhaustive": _cmd_exhaustive, "eval": _cmd_eval, "parity": _cmd_parity,
                    "bench": _cmd_bench}
        return commands[args.command](args)
    except UserError as exc:
        print(f"wfrl: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("wfrl: interrupted", file=sys.stderr)
        return 130
    except SystemExit as exc:
        # SIGTERM while shared memory is held: wfrl.collect.shm unlinked it and exits 128+signum.
        if isinstance(exc.code, int) and exc.code >= 128:
            print(f"wfrl: terminated (signal {exc.code - 128})", file=sys.stderr)
        raise


if __name__ == "__main__":
    sys.exit(main())
