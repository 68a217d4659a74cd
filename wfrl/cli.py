"""Command line: parse into validated configs and hand over. No training logic lives here.

Every user error ends as one line on stderr and exit status 2, never a traceback.
"""
from __future__ import annotations

import argparse
import errno
import json
from pathlib import Path
import sys

from wfrl.config import field_names, flag_name
from wfrl.errors import RecordWriteError, UserError

EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UserError(message)


def _int(text):
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None


def _float(text):
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


_TYPES = {"int": _int, "float": _float, "str": str}


def _fields(*classes, exclude=("ppo",)):
    """{name: (field, class)} over the classes, first class first; nested configs excluded."""
    import dataclasses
    out = {}
    for cls in classes:
        for f in dataclasses.fields(cls):
            if f.name not in exclude and f.name not in out:
                out[f.name] = (f, cls)
    return out


def _default_text(value) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if value is None:
        return "none"
    return str(value)


def _add_settings(parser, classes, notes=None, labels=None, exclude=("ppo",)):
    """One flag per setting of the config classes: name, type, metavar and help come from the
    dataclass field and its docstring; the default shown is each class's (labelled when they
    differ). Every flag defaults to None, so the command knows which ones were given."""
    import dataclasses

    from wfrl.config import field_docs, field_kind
    notes = notes or {}
    for name, (f, cls) in _fields(*classes, exclude=exclude).items():
        kind, _ = field_kind(f)
        doc = field_docs(cls).get(name, "")
        owners = [c for c in classes if name in {g.name for g in dataclasses.fields(c)}]
        if name in notes:
            default = notes[name]
        else:
            shown = []
            for c in owners:
                g = next(g for g in dataclasses.fields(c) if g.name == name)
                value = g.default if g.default is not dataclasses.MISSING else g.default_factory()
                shown.append(((labels or {}).get(c, ""), _default_text(value)))
            values = {v for _, v in shown}
            default = shown[0][1] if len(values) == 1 else " / ".join(f"{lab} {v}".strip()
                                                                     for lab, v in shown)
        if labels and len(owners) < len(classes):
            doc = f"{labels[owners[0]]}: {doc}"
        help_text = f"{doc} (default: {default})" if default else doc
        kw = {"default": None, "help": help_text}
        if kind == "bool":
            kw["action"] = argparse.BooleanOptionalAction
        else:
            kw["type"] = _TYPES.get(kind, str)
            kw["metavar"] = f.metadata.get("metavar") or {"int": "N", "float": "X"}.get(kind)
        parser.add_argument("--" + name.replace("_", "-"), **kw)


def _leaf_parsers(parser):
    """Every parser that runs a command (bench's sub-commands, not bench itself)."""
    subs = [x for x in parser._actions if isinstance(x, argparse._SubParsersAction)]
    if not subs:
        yield parser
        return
    for p in subs[0].choices.values():
        yield from _leaf_parsers(p)


def _add_config(parser):
    parser.add_argument("--config", default=None, metavar="FILE",
                        help="read settings from FILE: TOML with the flags' names as keys "
                             "(`episodes = 500`), or (train, exhaustive) a run directory / its "
                             "experiment_config.json; flags given on the command line win")
    return parser


def _subparser(parser, a):
    """The parser of the command `a` was parsed by (bench: its sub-command's)."""
    sub = next(x for x in parser._actions if isinstance(x, argparse._SubParsersAction))
    p = sub.choices[a.command]
    if a.command == "bench":
        inner = next(x for x in p._actions if isinstance(x, argparse._SubParsersAction))
        p = inner.choices[a.what]
    return p


def _config_value(action, value, where):
    name = action.dest
    if isinstance(action, (argparse.BooleanOptionalAction, argparse._StoreTrueAction)):
        if not isinstance(value, bool):
            raise UserError(f"{where}: {name} must be true or false, got {value!r}")
        return value
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise UserError(f"{where}: {name} must be a {action.metavar or 'value'}, got {value!r}")
    if action.type is None:
        return str(value)
    try:
        return action.type(str(value))
    except (argparse.ArgumentTypeError, ValueError) as exc:
        raise UserError(f"{where}: {name}: {exc}") from None


def _apply_config(parser, a):
    """Fill the settings not given on the command line from --config FILE."""
    from wfrl.config import is_run_record, load_settings_file
    settings, where = load_settings_file(a.config)
    if is_run_record(a.config) and a.command not in ("train", "exhaustive"):
        raise UserError(f"{where}: a run's saved settings go with wfrl train or wfrl exhaustive; "
                        f"give wfrl {a.command} a TOML file")
    actions = {x.dest: x for x in _subparser(parser, a)._actions
               if x.dest not in ("help", "config") and not isinstance(x, argparse._SubParsersAction)}
    for name, value in settings.items():
        action = actions.get(name)
        if action is None:
            cmd = a.command + (f" {a.what}" if a.command == "bench" else "")
            raise UserError(f"{where}: wfrl {cmd} has no setting {name!r}")
        if not action.option_strings:
            raise UserError(f"{where}: {name!r} is an argument of the command line, not a setting")
        if isinstance(action, argparse._StoreTrueAction):
            if not getattr(a, name):
                setattr(a, name, _config_value(action, value, where))
        elif getattr(a, name) is None:
            setattr(a, name, _config_value(action, value, where))


def _add_ppo(parser, preset_help):
    from wfrl.config import PPO_PRESETS, PPOConfig
    g = parser.add_argument_group("PPO")
    g.add_argument("--ppo-preset", default=None, metavar="|".join(PPO_PRESETS), help=preset_help)
    notes = {}
    for name in ("memory", "mask"):
        notes[name] = "recipe on, original off"
    _add_settings(g, (PPOConfig,), notes=notes)


def _add_train(sub):
    from wfrl.config import SearchConfig, TrainConfig
    p = sub.add_parser(
        "train", help="search the workflows with GP-UCB (default), or train one with --workflow",
        description="Without --workflow: a GP-UCB search over all 120 workflows (compliance-gated "
                    "PPO on each visited one). With --workflow: train that workflow only. "
                    "Where the two differ, defaults are shown as 'search X / --workflow Y'.")
    p.add_argument("--resume", default=None, metavar="DIR",
                   help="continue the interrupted search in DIR with its stored settings")
    _add_settings(p, (SearchConfig, TrainConfig),
                  labels={SearchConfig: "search", TrainConfig: "--workflow"},
                  notes={"workflow": "", "episodes_per_update": "search 50 / --workflow 200 "
                                                                "(recipe; original 10)",
                         "eval_every": "recipe 5000, original 0"})
    _add_ppo(p, "starting point for the learner settings, overridden by the flags given: recipe "
                "(default: 200 episodes per update with --workflow, memory, mask, periodic "
                "evaluation) or original (the original system: 10 episodes per update, "
                "observation only)")


def _add_exhaustive(sub):
    from wfrl.config import ExhaustiveConfig
    p = sub.add_parser("exhaustive", help="train and evaluate all 120 workflows under one "
                                          "protocol (the search's ground truth)")
    _add_settings(p, (ExhaustiveConfig,),
                  notes={"episodes_per_update": "200 with the recipe preset, 50 with original",
                         "pretrain_episodes": ""})
    _add_ppo(p, "learner settings: recipe (default: memory, mask, 200 episodes per update unless "
                "--episodes-per-update is given) or original (observation only, 50 episodes per "
                "update)")


def _add_eval(sub):
    from wfrl.config_eval import Cage2EvalConfig, EvalConfig
    p = sub.add_parser("eval", help="evaluate a checkpoint (greedy and sampling policy), or run "
                                     "the CAGE2 evaluation protocol with --cage2")
    p.add_argument("--cage2", action="store_true",
                   help="the CAGE Challenge 2 protocol: 30-, 50- and 100-step episodes against "
                        "B_lineAgent, RedMeanderAgent and SleepAgent, leaderboard-style table")
    _add_settings(p, (EvalConfig, Cage2EvalConfig),
                  labels={EvalConfig: "without --cage2", Cage2EvalConfig: "--cage2"})
    p.add_argument("--json", action="store_true",
                   help="print one JSON object (without --cage2: mean, se, n, compliance of the "
                        "greedy policy, and the same under 'sampling')")


def _add_parity(sub):
    from wfrl.config_tools import ParityConfig
    p = sub.add_parser("parity", help="compare the compiled simulator with the real CybORG")
    _add_settings(p, (ParityConfig,))
    p.add_argument("--json", action="store_true",
                   help="print one JSON object: sim, cyborg ({mean, se, n}), diff, equivalent")


def _add_bench(sub):
    from wfrl.config_tools import BenchCollectorsConfig, BenchSearchConfig, BenchTrainConfig
    p = sub.add_parser("bench", help="measure wfrl's throughput")
    what = p.add_subparsers(dest="what", required=True, parser_class=_Parser)
    c = what.add_parser("collectors", help="every collector on the same workload, with the bare "
                                           "environment rate measured in the same run")
    _add_settings(c, (BenchCollectorsConfig,))
    c.add_argument("--json", action="store_true",
                   help="print a JSON list, one object per collector: collector, episodes_per_s, "
                        "steps_per_s, efficiency (and n_workers, startup_s, worker_rss_mb)")
    t = what.add_parser("train", help="where training time goes: collect-only and update-only "
                                      "rates (default and original update path) and end-to-end "
                                      "training with and without overlap, in one run")
    _add_settings(t, (BenchTrainConfig,))
    t.add_argument("--json", action="store_true", help="print the results as one JSON object")
    q = what.add_parser("search", help="search quality on planted ground truths: every "
                                       "acquisition on synthetic problems with known answers")
    _add_settings(q, (BenchSearchConfig,))
    q.add_argument("--json", action="store_true", help="print the summary as one JSON object")


def _add_viewer(sub):
    """`wfrl replay` and `wfrl report`: pages to look at (wfrl.replay)."""
    from wfrl.config import BACKEND_METAVAR

    def episode_flags(p):
        p.add_argument("--backend", default=None, metavar=BACKEND_METAVAR,
                       help="environment backend (default: sim)")
        p.add_argument("--red-agent", default=None,
                       metavar="B_lineAgent|RedMeanderAgent|SleepAgent",
                       help="red attacker (default: B_lineAgent)")
        p.add_argument("--seed", type=_int, default=None,
                       help="seed of the episode (default: 153)")
        p.add_argument("--episode", type=_int, default=None, metavar="N",
                       help="global episode number under that seed (default: 0)")

    p = sub.add_parser("replay", help="write one episode of a policy or agent as a "
                                      "self-contained HTML page")
    p.add_argument("--checkpoint", help="the policy (a file or pretrained:NAME), played greedily")
    p.add_argument("--agent", metavar="MODULE:FACTORY", help="any agent with CAGE2's interface "
                                                             "(as in eval --cage2 --agent)")
    p.add_argument("--workflow", help="judge fixes under this workflow (default: the "
                                      "checkpoint's; none for an agent)")
    p.add_argument("--steps", type=_int, default=None, help="blue steps (default: 100)")
    p.add_argument("--html", required=True, metavar="FILE", help="the page to write")
    episode_flags(p)
    from wfrl.config_eval import PlanSettings
    _add_settings(p, (PlanSettings,))
    c = sub.add_parser("compare", help="paired differences of two policies scored on the same "
                                       "episodes (two eval --cage2 --episodes-out files)")
    c.add_argument("a", metavar="A.jsonl")
    c.add_argument("b", metavar="B.jsonl")
    c.add_argument("--json", action="store_true", help="print the result as JSON")
    r = sub.add_parser("report", help="write a run's page: learning curves, the search's "
                                      "posterior and feasibility, a replay of its best policy")
    r.add_argument("run_dir", metavar="RUN_DIR")
    r.add_argument("--html", metavar="FILE", help="the page to write (default: "
                                                  "RUN_DIR/report.html)")
    episode_flags(r)


# the episode flags of replay and report (None on the parsed flags until given: --config fills
# what the command line left out, then these)
_EPISODE_DEFAULTS = {"backend": "sim", "red_agent": "B_lineAgent", "seed": 153, "episode": 0,
                     "steps": 100}


def _episode_defaults(a):
    for k, v in _EPISODE_DEFAULTS.items():
        if getattr(a, k, v) is None:
            setattr(a, k, v)


def _cmd_replay(a) -> int:
    _episode_defaults(a)
    from wfrl.config_eval import PlanSettings
    from wfrl.replay import record_episode, replay_html, write_page
    plan = PlanSettings(**_given(a, field_names(PlanSettings))).validate()
    if plan.plan and a.checkpoint is None:
        raise UserError("--plan searches around a checkpoint's policy: give --checkpoint")
    data = record_episode(a.backend, a.red_agent, a.seed, a.episode, a.steps,
                          checkpoint=a.checkpoint, agent=a.agent, workflow=a.workflow,
                          plan=(plan.plan_budget(), plan.plan_red) if plan.plan else None)
    write_page(a.html, replay_html(data))
    print(f"wrote {a.html}: {len(data['steps'])} steps, return {data['return']:.1f}")
    return 0


def _cmd_compare(a) -> int:
    from wfrl.cage2_eval import compare_episodes, format_comparison
    res = compare_episodes(a.a, a.b)
    print(json.dumps(res) if a.json else format_comparison(res))
    return 0


def _cmd_report(a) -> int:
    _episode_defaults(a)
    from wfrl.replay import report_html, write_page
    out = a.html or str(Path(a.run_dir) / "report.html")
    write_page(out, report_html(a.run_dir, a.backend, a.red_agent, a.seed, a.episode))
    print(f"wrote {out}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="wfrl", description="workflow-conditioned PPO for CAGE Challenge 2")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    _add_train(sub)
    _add_exhaustive(sub)
    _add_eval(sub)
    _add_parity(sub)
    _add_bench(sub)
    _add_viewer(sub)
    for p in _leaf_parsers(parser):   # --config on every command
        _add_config(p)
    return parser


def _given(a, names) -> dict:
    return {n: getattr(a, n) for n in names if getattr(a, n, None) is not None}


def _cmd_train(a) -> int:
    from wfrl.train import train_run, train_setting_names
    train_run({n: getattr(a, n) for n in train_setting_names() if getattr(a, n, None) is not None})
    return 0


def _cmd_exhaustive(a) -> int:
    from wfrl.config import DEFAULT_PRESET, ExhaustiveConfig, PPOConfig, preset_settings
    preset = a.ppo_preset or DEFAULT_PRESET
    run_preset, ppo_preset = preset_settings(preset)
    given = _given(a, field_names(ExhaustiveConfig))
    if "episodes_per_update" not in given and preset == "recipe":
        given["episodes_per_update"] = run_preset["episodes_per_update"]
    if given.get("protocol") == "recipe":
        from wfrl.config import RECIPE_SCHEDULE
        ppo_preset = {**ppo_preset, **RECIPE_SCHEDULE}
    ppo = PPOConfig(**{**ppo_preset, **_given(a, field_names(PPOConfig))})
    cfg = ExhaustiveConfig(**given, ppo=ppo).validate()
    if cfg.protocol == "recipe":
        from wfrl.search.truth import truth
        truth(cfg)
        return 0
    from wfrl.search.exhaustive import exhaustive
    exhaustive(cfg)
    return 0


def _cmd_eval_cage2(a, given) -> int:
    from wfrl.config_eval import Cage2EvalConfig
    bad = [k for k in given if k not in field_names(Cage2EvalConfig)]
    if bad:
        raise UserError(f"{flag_name(bad[0])} does not apply with --cage2 (it plays every red)")
    cfg = Cage2EvalConfig(**given).validate()
    from wfrl.cage2_eval import EvaluationFailed, cage2_evaluate, format_table
    from wfrl.runlog import write_json
    cks = {"all": cfg.checkpoint, "b_line": cfg.checkpoint_b_line,
           "meander": cfg.checkpoint_meander}
    save = (lambda res: write_json(Path(cfg.out), res)) if cfg.out else None
    try:
        res = cage2_evaluate(cks, backend=cfg.backend, episodes=cfg.episodes, seed=cfg.seed,
                             n_workers=cfg.n_workers, greedy=not cfg.sampling,
                             workflow=cfg.workflow, agent=cfg.agent,
                             action_timeout=cfg.action_timeout,
                             episode_timeout=cfg.episode_timeout, on_setting=save,
                             agent_output=cfg.agent_output,
                             attribute=cfg.attribute, episodes_out=cfg.episodes_out,
                             plan=(cfg.plan_budget(), cfg.plan_red) if cfg.plan else None,
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
    print(json.dumps(res) if a.json else format_table(res))
    return 0


def _cmd_eval(a) -> int:
    from wfrl.config_eval import Cage2EvalConfig, EvalConfig
    given = _given(a, dict.fromkeys(field_names(EvalConfig) + field_names(Cage2EvalConfig)))
    if a.cage2:
        return _cmd_eval_cage2(a, given)
    bad = [k for k in given if k not in field_names(EvalConfig)]
    if bad:
        raise UserError(f"{flag_name(bad[0])} goes with --cage2")
    cfg = EvalConfig(**given).validate()
    from wfrl.evaluate import evaluate
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


def _cmd_parity(a) -> int:
    from wfrl.config_tools import ParityConfig
    cfg = ParityConfig(**_given(a, field_names(ParityConfig))).validate()
    from wfrl.parity import parity
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


def _cmd_bench_search(a) -> int:
    from wfrl.config_tools import BenchSearchConfig
    cfg = BenchSearchConfig(**_given(a, field_names(BenchSearchConfig))).validate()
    from wfrl.search.planted import format_planted, run_planted
    res = run_planted(range(cfg.instances), range(cfg.seeds),
                      progress=None if a.json else (lambda line: print(line, flush=True)))
    if cfg.out:
        from wfrl.runlog import write_json
        write_json(Path(cfg.out), res)
    if a.json:
        print(json.dumps({k: v for k, v in res.items() if k != "runs"}))
    else:
        print(format_planted(res))
    return 0


def _cmd_bench_train(a) -> int:
    from wfrl.config_tools import BenchTrainConfig
    cfg = BenchTrainConfig(**_given(a, field_names(BenchTrainConfig))).validate()
    from wfrl.benchmarks import bench_belief_train, bench_train
    say = None if a.json else (lambda line: print(line, flush=True))
    if cfg.belief_input:
        res = bench_belief_train(cfg.belief_input, cfg.episodes_per_update, cfg.batches,
                                 cfg.e2e_episodes, cfg.repeats, cfg.collector, cfg.n_workers,
                                 cfg.red_agent, cfg.seed, progress=say)
    else:
        res = bench_train(cfg.episodes_per_update, cfg.batches, cfg.e2e_episodes, cfg.repeats,
                          cfg.collector, cfg.n_workers, cfg.red_agent, cfg.seed, progress=say)
    if a.json:
        print(json.dumps(res))
    return 0


def _cmd_bench(a) -> int:
    if a.what == "search":
        return _cmd_bench_search(a)
    if a.what == "train":
        return _cmd_bench_train(a)
    from wfrl.config_tools import BenchCollectorsConfig
    cfg = BenchCollectorsConfig(**_given(a, field_names(BenchCollectorsConfig))).validate()
    from wfrl.benchmarks import bench_collectors
    from wfrl.envs import make_backend
    from wfrl.envs.base import backend_engine
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


def _after_write_failure(a) -> str:
    """What continues a run that stopped because a record could not be written."""
    if a.command == "train":   # a search or a single run: both resume
        from wfrl.config import SearchConfig
        run = a.resume or getattr(a, "out", None) or SearchConfig.out
        return f"then `wfrl train --resume {run}` continues the run"
    if a.command == "exhaustive":
        return "then the same command continues the run"
    return "then run the command again"


# A write that fails for these reasons is the machine's state, not a bug: one line, exit 2.
_DISK_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS)


def main(argv=None) -> int:
    args = None
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        if getattr(args, "config", None) is not None:
            _apply_config(parser, args)
        commands = {"train": _cmd_train, "exhaustive": _cmd_exhaustive, "eval": _cmd_eval, "parity": _cmd_parity,
                    "bench": _cmd_bench, "replay": _cmd_replay, "report": _cmd_report,
                    "compare": _cmd_compare}
        return commands[args.command](args)
    except OSError as exc:
        if exc.errno not in _DISK_ERRNOS or args is None:
            raise
        failed = RecordWriteError(exc.filename or "a record of the run", exc)
        print(f"wfrl: error: {failed}, {_after_write_failure(args)}", file=sys.stderr)
        return EXIT_USAGE
    except RecordWriteError as exc:
        print(f"wfrl: error: {exc}, {_after_write_failure(args)}", file=sys.stderr)
        return EXIT_USAGE
    except UserError as exc:
        print(f"wfrl: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ModuleNotFoundError as exc:   # a command whose extra is not installed
        from wfrl.errors import missing_extra
        cmd = "wfrl" if args is None else f"wfrl {args.command}"
        failed = missing_extra(exc, cmd)
        if failed is None:
            raise
        print(f"wfrl: error: {failed}", file=sys.stderr)
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
