"""Why `--plan` does not beat the greedy policy: the search measured apart from its belief, on the
simulator (which knows the true state), for pretrained:critical_first on 100-step B_line and
Meander episodes from the CAGE2 protocol's reserved range (seed 153), paired with greedy.

Three players on the same episodes, the time limit off (results do not depend on the load):
  greedy    the policy alone;
  plan      --plan at the given budget (belief from the particles, `mixture` red kinds);
  oracle    the same search with every particle set to the true state before each decision:
            what the search gains with a perfect belief.
And, on every `--every`-th decision of `plan`, the rollout value error: the planner's
per-candidate rollout values against a reference from the true state (REF_ROUNDS paired rounds
of the same rollouts): bias and RMSE of the greedy action's value, and of each alternative's
paired gain over it; how often a switch the planner made has a positive reference gain.

    OMP_NUM_THREADS=1 python experiments/plan_diagnostics.py N [BUDGET_JSON] [--every K]
        [--no-oracle | --oracle-only] [--reds B_lineAgent,RedMeanderAgent]
"""
import dataclasses
import json
import sys
import time

import numpy as np

from wfrl.collect.rollout import make_policy
from wfrl.envs import make_backend
from wfrl.evaluation.checkpoint import policy_of_checkpoint
from wfrl.evaluation.planner import PlanBudget, make_planner, red_set
from wfrl.evaluation.returns import play
from wfrl.rng import CAGE2_EPISODE_BASE, episode_block, episode_seeds
from wfrl.workflow import Workflow

REF_ROUNDS = 256
REF_PARTICLES = 64


def planner_for(policy, b: PlanBudget, rounds=None, particles=None):
    """The budget's planner, time limit off; the reference's with its own rounds and particles."""
    return make_planner(policy, dataclasses.replace(b, time_ms=0.0, rollouts=rounds or b.rollouts,
                                                    particles=particles or b.particles))


def play_search(backend, policy, b, episodes, oracle: bool, every: int = 0):
    """Returns (returns, switches, decisions, errors: one dict per checked decision)."""
    sim = backend.sim
    env_seeds, act_seeds = episode_seeds(153, np.asarray(episodes, np.int64))
    pl = planner_for(policy, b)
    ref = planner_for(policy, b, REF_ROUNDS, REF_PARTICLES) if every else None
    rets, errors = [], []
    switches = decisions = 0
    for es, ac in zip(env_seeds, act_seeds):
        backend.seed(int(es))
        obs, access = backend.reset()
        for p in (pl, ref):
            if p is not None:
                p.reset(red_set("mixture"), False, int(ac), 100)
        prev, total = None, 0.0
        for t in range(100):
            if prev is not None:
                pl.observe(prev, obs)
            if ref is not None:
                ref.copy_memory_from(pl)    # the history up to obs (decide adds obs)
            if oracle:
                pl.set_particles_to(sim, 0)
            a, greedy, k, vetoed, rounds = pl.decide(obs)[:5]
            if ref is not None and t % every == 0 and k > 1 and rounds >= 2:
                cand, vals = pl.last_estimates(k, rounds)
                ref.set_particles_to(sim, 0)
                _, _, k2, _, r2 = ref.decide(obs)[:5]
                cand2, vals2 = ref.last_estimates(k2, r2)
                m2 = {int(c): vals2[i].mean() for i, c in enumerate(cand2)}
                g2 = {int(c): vals2[i] - vals2[0] for i, c in enumerate(cand2)}
                if int(cand[0]) == int(cand2[0]) and r2 >= 2:
                    errors.append({
                        "est": float(vals[0].mean()), "ref": float(m2[int(cand[0])]),
                        "alts": [{"est": float((vals[i] - vals[0]).mean()),
                                  "ref": float(g2[int(c)].mean()),
                                  "chosen": int(c) == a and a != greedy}
                                 for i, c in enumerate(cand) if i > 0 and int(c) in g2]})
            decisions += 1
            switches += a != greedy
            obs, reward, access = backend.step(a)
            total += reward
            prev = a
        rets.append(total)
    return np.array(rets), switches, decisions, errors


def se(x):
    return float(np.std(x, ddof=1) / np.sqrt(len(x)))


def error_summary(errors):
    """Bias and RMSE of the planner's value of the greedy action and of each alternative's paired
    gain, against the reference from the true state; the reference's best gain per decision."""
    if not errors:
        return {}
    dv = np.array([e["est"] - e["ref"] for e in errors])
    alts = [x for e in errors for x in e["alts"]]
    ge = np.array([x["est"] for x in alts])
    gr = np.array([x["ref"] for x in alts])
    best = np.array([max([0.0] + [x["ref"] for x in e["alts"]]) for e in errors])
    ch = [x for x in alts if x["chosen"]]
    r3 = lambda v: round(float(v), 3)
    return {"decisions_checked": len(errors),
            "greedy_value_bias": r3(dv.mean()), "greedy_value_rmse": r3(np.sqrt((dv ** 2).mean())),
            "alternatives": len(alts),
            "gain_bias": r3((ge - gr).mean()), "gain_rmse": r3(np.sqrt(((ge - gr) ** 2).mean())),
            "gain_corr": r3(np.corrcoef(ge, gr)[0, 1]) if len(alts) > 2 else None,
            "ref_gain_mean": r3(gr.mean()),
            "ref_gain_positive_share": r3((gr > 0).mean()),
            "ref_best_gain_per_decision": r3(best.mean()),
            "switches_checked": len(ch),
            "switches_ref_positive": r3(np.mean([x["ref"] > 0 for x in ch])) if ch else None,
            "switches_ref_gain_mean": r3(np.mean([x["ref"] for x in ch])) if ch else None}


def main(argv):
    n = int(argv[0])
    kw = json.loads(argv[1]) if len(argv) > 1 and not argv[1].startswith("--") else {}
    every = int(argv[argv.index("--every") + 1]) if "--every" in argv else 4
    if every < 0:
        raise SystemExit("--every must be 0 (no value error) or positive")
    b = PlanBudget(**{**kw, "time_ms": 0.0}).check()
    weights, net, wf, lam, foothold = policy_of_checkpoint("pretrained:critical_first")
    wf = Workflow.parse(wf)
    policy = make_policy(weights, net, wf, lam, foothold, greedy=True)
    print(f"budget {b} (time limit off), n={n} per red, seed 153, reference {REF_ROUNDS} rounds "
          f"from the true state on every {every}th decision", flush=True)
    reds = argv[argv.index("--reds") + 1].split(",") if "--reds" in argv else \
        ["B_lineAgent", "RedMeanderAgent"]
    for red in reds:
        k = {"B_lineAgent": 2, "RedMeanderAgent": 5}[red]
        start = episode_block(CAGE2_EPISODE_BASE, k)
        eps = range(start, start + n)
        backend = make_backend("sim", red, seed=153)
        g = np.array([s.env_return for s in play(backend, weights, net, wf, lam, foothold, eps,
                                                  153, True, horizon=100)])
        out = {"red": red, "n": n, "greedy": [round(float(g.mean()), 3), round(se(g), 3)]}
        players = ((() if "--oracle-only" in argv else (("plan", False, every),)) +
                   ((("oracle", True, 0),) if "--no-oracle" not in argv else ()))
        for name, oracle, ev in players:
            t0 = time.time()
            r, sw, dec, errors = play_search(backend, policy, b, eps, oracle, ev)
            d = r - g
            out[name] = {"mean": round(float(r.mean()), 3), "se": round(se(r), 3),
                         "minus_greedy": round(float(d.mean()), 3),
                         "minus_greedy_se": round(se(d), 3),
                         "switch_rate": round(sw / dec, 4), "wall_s": round(time.time() - t0)}
            if ev:
                out[name]["value_error"] = error_summary(errors)
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
