"""The command line's parser: every command's flags, generated from the settings' declarations
(wfrl.config: a dataclass field's type, default, check and help), and --config FILE applied under
the flags given."""
from __future__ import annotations

import argparse

from wfrl.errors import UserError


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

    from wfrl.config.fields import field_docs, field_kind
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
                value = g.default if g.default is not dataclasses.MISSING else \
                    g.default_factory() if callable(g.default_factory) else None
                shown.append(((labels or {}).get(c, ""), _default_text(value)))
            values = {v for _, v in shown}
            default = shown[0][1] if len(values) == 1 else " / ".join(f"{lab} {v}".strip()
                                                                     for lab, v in shown)
        if labels and len(owners) < len(classes):
            doc = f"{labels[owners[0]]}: {doc}"
        help_text = f"{doc} (default: {default})" if default else doc
        kw: dict[str, object] = {"default": None, "help": help_text}
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


def apply_config(parser, a):
    """Fill the settings not given on the command line from --config FILE."""
    from wfrl.config.files import is_run_record, load_settings_file
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
    from wfrl.config.run import PPO_PRESETS, PPOConfig
    g = parser.add_argument_group("PPO")
    g.add_argument("--ppo-preset", default=None, metavar="|".join(PPO_PRESETS), help=preset_help)
    def shown(v):
        return ("on" if v else "off") if isinstance(v, bool) else str(v)
    recipe, original = PPO_PRESETS["recipe"]["ppo"], PPO_PRESETS["original"]["ppo"]
    notes = {name: f"recipe {shown(recipe[name])}, original {shown(original[name])}"
             for name in recipe if recipe[name] != original.get(name)}
    _add_settings(g, (PPOConfig,), notes=notes)


def _add_train(sub):
    from wfrl.config.run import SearchConfig, TrainConfig
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
                "(default: the shipped policies' command: 200 episodes per update with "
                "--workflow, memory, mask, per-network clip, schedules annealed to 0.1, no "
                "first-fix bonus, periodic evaluation) or original (the original system: 10 "
                "episodes per update, observation only)")


def _add_attack(sub):
    from wfrl.config.duel import AttackConfig
    from wfrl.config.run import PPOConfig
    p = sub.add_parser("attack", help="train a red best response to a frozen defender (red as an "
                                      "agent; docs/duel.md)",
                       description="Red learns, with wfrl's PPO, to attack a frozen blue "
                                   "checkpoint in the compiled simulator; summary.json gives "
                                   "the defender's return against it beside B_line's.")
    p.add_argument("--resume", default=None, metavar="DIR",
                   help="continue the interrupted attack run in DIR with its stored settings")
    _add_settings(p, (AttackConfig,))
    g = p.add_argument_group("red's PPO")
    _add_settings(g, (PPOConfig,), notes={"clip_per_net": "on"})


def _add_population(sub):
    from wfrl.config.duel import PopulationConfig
    from wfrl.config.run import PPOConfig
    p = sub.add_parser("population", help="train a defender against a growing population of "
                                          "reds that learn (double oracle; docs/robustness.md)",
                       description="Each round: a red best response to the current defender "
                                   "joins the population; the defender trains on against the "
                                   "population's mixture (Nash or uniform) under random "
                                   "workflows. curve.csv: exploitability per round.")
    p.add_argument("--resume", default=None, metavar="DIR",
                   help="continue the interrupted population run in DIR with its stored settings")
    _add_settings(p, (PopulationConfig,))
    g = p.add_argument_group("the defender's PPO")
    _add_settings(g, (PPOConfig,), notes={"memory": "on", "mask": "on", "clip_per_net": "on",
                                          "lr_final": "0.1", "entropy_final": "0.1"})


def _add_exhaustive(sub):
    from wfrl.config.run import ExhaustiveConfig
    p = sub.add_parser("exhaustive", help="train and evaluate all 120 workflows under one "
                                          "protocol (the search's ground truth)")
    _add_settings(p, (ExhaustiveConfig,),
                  notes={"episodes_per_update": "200 with the recipe preset, 50 with original",
                         "pretrain_episodes": ""})
    _add_ppo(p, "learner settings: recipe (default: memory, mask, 200 episodes per update unless "
                "--episodes-per-update is given) or original (observation only, 50 episodes per "
                "update)")


def _add_eval(sub):
    from wfrl.config.eval import Cage2EvalConfig, EvalConfig
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
    from wfrl.config.tools import ParityConfig
    p = sub.add_parser("parity", help="compare the compiled simulator with the real CybORG")
    _add_settings(p, (ParityConfig,))
    p.add_argument("--json", action="store_true",
                   help="print one JSON object: sim, cyborg ({mean, se, n}), diff, equivalent")


def _add_bench(sub):
    from wfrl.config.tools import BenchCollectorsConfig, BenchSearchConfig, BenchTrainConfig
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
    """`wfrl replay` and `wfrl report`: pages to look at (wfrl.evaluation.replay)."""
    from wfrl.config.fields import BACKEND_METAVAR

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
    from wfrl.config.eval import PlanSettings
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


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="wfrl", description="workflow-conditioned PPO for CAGE Challenge 2")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    _add_train(sub)
    _add_exhaustive(sub)
    _add_attack(sub)
    _add_population(sub)
    _add_eval(sub)
    _add_parity(sub)
    _add_bench(sub)
    _add_viewer(sub)
    for p in _leaf_parsers(parser):   # --config on every command
        _add_config(p)
    return parser
