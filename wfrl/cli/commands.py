"""The commands: each parses its flags into validated settings and hands them to the package
that does the work. No training or evaluation logic lives here."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from wfrl.config.fields import field_names, flag_name
from wfrl.errors import UserError

# the episode flags of replay and report (None on the parsed flags until given: --config fills
# what the command line left out, then these)
_EPISODE_DEFAULTS = {"backend": "sim", "red_agent": "B_lineAgent", "seed": 153, "episode": 0,
                     "steps": 100}


def _episode_defaults(a):
    """Fill the episode flags left out, then check them all (given on the command line or by
    --config): a seed and an episode number are whole numbers in [0, 2^63), --steps positive."""
    from wfrl.config.fields import positive, seed_range
    for k, v in _EPISODE_DEFAULTS.items():
        if getattr(a, k, v) is None:
            setattr(a, k, v)
    seed_range("seed", a.seed)
    seed_range("episode", a.episode)
    if hasattr(a, "steps"):
        positive("steps", a.steps)


def _given(a, names) -> dict:
    return {n: getattr(a, n) for n in names if getattr(a, n, None) is not None}


def train(a) -> int:
    from wfrl.api import train_run, train_setting_names
    train_run({n: getattr(a, n) for n in train_setting_names() if getattr(a, n, None) is not None})
    return 0


def exhaustive(a) -> int:
    from wfrl.config.run import DEFAULT_PRESET, ExhaustiveConfig, PPOConfig, preset_settings
    preset = a.ppo_preset or DEFAULT_PRESET
    given = _given(a, field_names(ExhaustiveConfig))
    run_preset, ppo_preset = preset_settings(preset, given.get("protocol", ExhaustiveConfig.protocol))
    if "episodes_per_update" not in given and preset == "recipe":
        given["episodes_per_update"] = run_preset["episodes_per_update"]
    ppo = PPOConfig(**{**ppo_preset, **_given(a, field_names(PPOConfig))})
    cfg = ExhaustiveConfig(**given, ppo=ppo).validate()
    if cfg.protocol == "recipe":
        from wfrl.search.truth import truth
        truth(cfg)
        return 0
    from wfrl.search.exhaustive import exhaustive
    exhaustive(cfg)
    return 0


def _evaluate_cage2(a, given) -> int:
    from wfrl.config.eval import Cage2EvalConfig
    from wfrl.evaluation.planner import PlanBudget
    bad = [k for k in given if k not in field_names(Cage2EvalConfig)]
    if bad:
        raise UserError(f"{flag_name(bad[0])} does not apply with --cage2 (it plays every red)")
    cfg = Cage2EvalConfig(**given).validate()
    from wfrl.evaluation.cage2 import EvaluationFailed, cage2_evaluate, format_table
    from wfrl.runlog import write_json
    cks = {"all": cfg.checkpoint, "b_line": cfg.checkpoint_b_line,
           "meander": cfg.checkpoint_meander}
    save = (lambda res: write_json(Path(cfg.out), res)) if cfg.out else None
    try:
        res = cage2_evaluate(cks, backend=cfg.backend, episodes=cfg.episodes, seed=cfg.seed,
                             reds=cfg.red_tuple(),
                             n_workers=cfg.n_workers, greedy=not cfg.sampling,
                             workflow=cfg.workflow, agent=cfg.agent,
                             action_timeout=cfg.action_timeout,
                             episode_timeout=cfg.episode_timeout, on_setting=save,
                             agent_output=cfg.agent_output,
                             attribute=cfg.attribute, episodes_out=cfg.episodes_out,
                             plan=(PlanBudget.from_settings(cfg), cfg.plan_red) if cfg.plan else None,
                             progress=None if a.json else (lambda line: print(
                                 line, file=sys.stderr, flush=True)))
    except EvaluationFailed as exc:   # the finished settings, then the one-line error
        if exc.partial["settings"]:
            print(json.dumps(exc.partial) if a.json else format_table(exc.partial), flush=True)
        if save:
            save(exc.partial)
        raise
    if save:
        save(res)
    if not a.json and cfg.reds is not None:
        from wfrl.evaluation.cage2 import format_robustness
        print(format_table(res) + "\n" + format_robustness(res))
    else:
        print(json.dumps(res) if a.json else format_table(res))
    return 0


def evaluate(a) -> int:
    from wfrl.config.eval import Cage2EvalConfig, EvalConfig
    given = _given(a, dict.fromkeys(field_names(EvalConfig) + field_names(Cage2EvalConfig)))
    if a.cage2:
        return _evaluate_cage2(a, given)
    bad = [k for k in given if k not in field_names(EvalConfig)]
    if bad:
        raise UserError(f"{flag_name(bad[0])} goes with --cage2")
    cfg = EvalConfig(**given).validate()
    from wfrl.evaluation.returns import evaluate
    res = evaluate(cfg)
    if a.json:
        g = res["greedy"]
        other = "plan" if "plan" in res else "sampling"
        print(json.dumps({"mean": g["mean"], "se": g["se"], "n": g["n"],
                          "compliance": g["compliance"], "policy": "greedy",
                          other: res[other], "workflow": res["workflow"],
                          "backend": res["backend"], "red_agent": res["red_agent"]}))
    else:
        print(f"workflow {res['workflow']} on {res['backend']} vs {res['red_agent']}")
        for mode in ("greedy", "plan" if "plan" in res else "sampling"):
            s = res[mode]
            print(f"  {mode:8s} return {s['mean']:9.2f} ± {s['se']:.2f} (n={s['n']})  "
                  f"compliance {s['compliance']:.3f}  fixes/episode {s['fixes']:.2f}")
        if "plan" in res:
            q = res["plan"]["search"]
            print(f"  search: {q['decisions']} decisions, {q['switch_rate']} left greedy, "
                  f"ms median {q['ms_median']} p95 {q['ms_p95']} max {q['ms_max']}, "
                  f"{q['timeouts']} timed out, belief quality {q['belief_quality']}, "
                  f"fallback rate {q['fallback_rate']}")
    return 0


def parity(a) -> int:
    from wfrl.config.tools import ParityConfig
    cfg = ParityConfig(**_given(a, field_names(ParityConfig))).validate()
    from wfrl.tools.parity import parity
    res = parity(cfg.red_agent, cfg.blue, cfg.episodes,
                 cfg.sim_episodes or max(cfg.episodes, 3000), cfg.seed)
    if a.json:
        print(json.dumps({k: res[k] for k in ("sim", "cyborg", "diff", "equivalent", "margin",
                                              "diff_se", "p", "red_agent", "blue")}))
    else:
        s, c = res["sim"], res["cyborg"]
        print(f"{cfg.blue} blue vs {cfg.red_agent}, mean 100-step return ± s.e.")
        print(f"  sim     {s['mean']:9.2f} ± {s['se']:.2f} (n={s['n']})")
        print(f"  cyborg  {c['mean']:9.2f} ± {c['se']:.2f} (n={c['n']})")
        print(f"  diff    {res['diff']:+9.2f} ± {res['diff_se']:.2f}; margin ±{res['margin']:.2f}")
        verdict = "equivalent" if res["equivalent"] else "NOT shown equivalent"
        print(f"  TOST (alpha 0.05): {verdict} (p = {res['p']:.3g})")
    return 0


def _bench_search(a) -> int:
    from wfrl.config.tools import BenchSearchConfig
    cfg = BenchSearchConfig(**_given(a, field_names(BenchSearchConfig))).validate()
    from wfrl.search.planted import format_planted, run_planted
    res = run_planted(range(cfg.instances), range(cfg.seeds), batches=cfg.batch_sizes(),
                      progress=None if a.json else (lambda line: print(line, flush=True)))
    if cfg.out:
        from wfrl.runlog import write_json
        write_json(Path(cfg.out), res)
    if a.json:
        print(json.dumps({k: v for k, v in res.items() if k != "runs"}))
    else:
        print(format_planted(res))
    return 0


def _bench_train(a) -> int:
    from wfrl.config.tools import BenchTrainConfig
    cfg = BenchTrainConfig(**_given(a, field_names(BenchTrainConfig))).validate()
    from wfrl.tools.benchmarks import bench_belief_train, bench_privileged_train, bench_train
    say = None if a.json else (lambda line: print(line, flush=True))
    if cfg.attack is not None:
        from wfrl.tools.benchmarks import bench_attack_train
        res = bench_attack_train(cfg.attack, a.episodes_per_update or 200,
                                 a.e2e_episodes or 4000, cfg.repeats, cfg.collector,
                                 cfg.n_workers, cfg.seed, progress=say)
    elif cfg.privileged:
        res = bench_privileged_train(cfg.teacher, cfg.episodes_per_update, cfg.e2e_episodes,
                                     cfg.repeats, cfg.collector, cfg.n_workers, cfg.red_agent,
                                     cfg.seed, progress=say)
    elif cfg.belief_input:
        res = bench_belief_train(cfg.belief_input, cfg.episodes_per_update, cfg.batches,
                                 cfg.e2e_episodes, cfg.repeats, cfg.collector, cfg.n_workers,
                                 cfg.red_agent, cfg.seed, progress=say)
    else:
        res = bench_train(cfg.episodes_per_update, cfg.batches, cfg.e2e_episodes, cfg.repeats,
                          cfg.collector, cfg.n_workers, cfg.red_agent, cfg.seed, progress=say)
    if a.json:
        print(json.dumps(res))
    return 0


def bench(a) -> int:
    if a.what == "search":
        return _bench_search(a)
    if a.what == "train":
        return _bench_train(a)
    from wfrl.config.tools import BenchCollectorsConfig
    cfg = BenchCollectorsConfig(**_given(a, field_names(BenchCollectorsConfig))).validate()
    from wfrl.envs import make_backend
    from wfrl.envs.base import backend_engine
    from wfrl.tools.benchmarks import bench_collectors
    episodes = cfg.episodes or (40 if backend_engine(cfg.backend) == "cyborg" else 2000)
    make_backend(cfg.backend, cfg.red_agent).close()  # a missing extra fails here, in one line

    def show(row):
        if not a.json:
            rss = f", worker RSS {row['worker_rss_mb']} MB" if row.get("worker_rss_mb") else ""
            print(f"  {row['collector']:10s} x{row['n_workers']}: {row['episodes_per_s']:10.1f} "
                  f"episodes/s {row['steps_per_s']:12.0f} steps/s  efficiency "
                  f"{row['efficiency']:.3f}  (start-up {row['startup_s']:.1f} s{rss})", flush=True)

    if not a.json:
        print(f"{cfg.backend} vs {cfg.red_agent}, {episodes} episodes per collector")
    res = bench_collectors(cfg.backend, cfg.n_workers, episodes, cfg.red_agent, progress=show)
    if a.json:
        print(json.dumps(res))
    else:
        b = res[0]
        print(f"  bare env   x1: {b['episodes_per_s']:10.1f} episodes/s {b['steps_per_s']:12.0f} "
              f"steps/s (reference)")
    return 0


def replay(a) -> int:
    _episode_defaults(a)
    from wfrl.config.eval import PlanSettings
    from wfrl.evaluation.planner import PlanBudget
    from wfrl.evaluation.replay import record_episode, replay_html, write_page
    plan = PlanSettings(**_given(a, field_names(PlanSettings))).validate()
    if plan.plan and a.checkpoint is None:
        raise UserError("--plan searches around a checkpoint's policy: give --checkpoint")
    data = record_episode(a.backend, a.red_agent, a.seed, a.episode, a.steps,
                          checkpoint=a.checkpoint, agent=a.agent, workflow=a.workflow,
                          plan=(PlanBudget.from_settings(plan), plan.plan_red) if plan.plan else None)
    write_page(a.html, replay_html(data))
    print(f"wrote {a.html}: {len(data['steps'])} steps, return {data['return']:.1f}")
    return 0


def compare(a) -> int:
    from wfrl.evaluation.cage2 import compare_episodes, format_comparison
    res = compare_episodes(a.a, a.b)
    print(json.dumps(res) if a.json else format_comparison(res))
    return 0


def report(a) -> int:
    _episode_defaults(a)
    from wfrl.evaluation.replay import report_html, write_page
    out = a.html or str(Path(a.run_dir) / "report.html")
    warnings: list[str] = []
    write_page(out, report_html(a.run_dir, a.backend, a.red_agent, a.seed, a.episode, warnings))
    for w in warnings:   # after the page is written: a failed report says one line only
        print(f"wfrl: warning: {w}", file=sys.stderr)
    print(f"wrote {out}")
    return 0


def attack(a) -> int:
    from wfrl.config.duel import ATTACK_PPO, AttackConfig
    from wfrl.config.run import PPOConfig
    given = _given(a, field_names(AttackConfig))
    if a.resume is not None:
        if given or _given(a, field_names(PPOConfig)):
            raise UserError("--resume continues with the run's stored settings; give no other flag")
        from wfrl.training.attack import attack as run_attack
        from wfrl.training.attack import stored_config
        run_attack(stored_config(a.resume), resume=True)
        return 0
    ppo = PPOConfig(**{**ATTACK_PPO, **_given(a, field_names(PPOConfig))})
    cfg = AttackConfig(**given, ppo=ppo).validate()
    from wfrl.training.attack import attack as run_attack
    run_attack(cfg)
    return 0


def population(a) -> int:
    from wfrl.config.duel import POPULATION_PPO, PopulationConfig
    from wfrl.config.run import PPOConfig
    given = _given(a, field_names(PopulationConfig))
    if a.resume is not None:
        if given or _given(a, field_names(PPOConfig)):
            raise UserError("--resume continues with the run's stored settings; give no other flag")
        from wfrl.training.population import population as run
        from wfrl.training.population import stored_config
        run(stored_config(a.resume), resume=True)
        return 0
    ppo = PPOConfig(**{**POPULATION_PPO, **_given(a, field_names(PPOConfig))})
    cfg = PopulationConfig(**given, ppo=ppo).validate()
    from wfrl.training.population import population as run
    run(cfg)
    return 0


COMMANDS = {"train": train, "exhaustive": exhaustive, "eval": evaluate, "parity": parity,
            "bench": bench, "replay": replay, "report": report, "compare": compare,
            "attack": attack, "population": population}
