"""What a search reports when it ends: the ranking of the workflows it vouches for,
summary.json, posterior.csv and the table it prints; and how one pick is explained in its log."""
from __future__ import annotations

import math

import numpy as np

from wfrl.config.run import SearchConfig
from wfrl.search.optimizer import SURE_LEVEL
from wfrl.search.state import Pick
from wfrl.workflow import Workflow

POSTERIOR_COLUMNS = ["Workflow", "Workflow_ID", "Posterior_Mean", "Posterior_SD", "P_Feasible",
                     "Visits", "Tied_With_Best"]


def ranking(opt, state, report) -> list[dict]:
    """Workflows the optimizer vouches for (a visit reached θ and it still predicts them
    feasible), best first by posterior mean, with their probability of being the best."""
    post = opt.posterior()
    mu, sd, pf = post.mean, post.sd, post.p_feasible
    obs = opt.feasible_observations()
    visits = opt.visits()
    latest = {v.workflow: v for v in state.visits if v.gp_updated}  # latest compliant
    out = []
    for w in report.candidates:
        v = latest[w]
        rs = [o["reward"] for o in obs if o["workflow"] == w]
        out.append({"_mu": float(mu[w]), "workflow": str(Workflow.from_index(w)),
                    "workflow_id": w,
                    "posterior_mean": round(float(mu[w]), 3),
                    "posterior_sd": round(float(sd[w]), 3),
                    "p_best": round(report.p_best.get(w, 0.0), 3),
                    "p_feasible": round(float(pf[w]), 3),
                    "reward": v.result.reward, "reward_se": v.result.se,
                    "mean_observed_reward": round(float(np.mean(rs)), 3),
                    "compliance": v.result.compliance, "visits": int(visits[w]),
                    "episodes_trained": state.trained.get(w, 0)})
    out.sort(key=lambda r: (-r["_mu"], r["workflow_id"]))
    for r in out:
        del r["_mu"]
    return out

def most_visited(state, visits) -> str | None:
    """When one workflow took more than a third of the visits: the acquisition's numbers at
    each of its visits, so a reader can judge whether they justified it."""
    done = state.visits
    if not visits.any() or visits.max() * 3 <= len(done):
        return None
    w = int(np.argmax(visits))
    its = [v for v in done if v.workflow == w]
    scores = ", ".join(f"{v.pick.score:.3f}" for v in its)
    return (f"{Workflow.from_index(w).arrow()} took {len(its)} of {len(done)} "
            f"visits; each time its acquisition score was the highest of the 120 "
            f"(scores {scores}; per visit: gp_sampling_log.csv)")


def search_summary(cfg: SearchConfig, state, opt, report) -> dict:
    """summary.json of a finished search (state: its SearchState; opt: its optimizer; report:
    the optimizer's closing report)."""
    ranked = ranking(opt, state, report)
    best = ranked[0] if ranked else None
    visits = opt.visits()
    summary = {
        "best_workflow": best["workflow"] if best else None,
        "best_workflow_id": best["workflow_id"] if best else None,
        "best_reward": best["reward"] if best else None,
        "best_reward_se": best["reward_se"] if best else None,
        "best_posterior_mean": best["posterior_mean"] if best else None,
        "best_compliance": best["compliance"] if best else None,
        "best_p_best": best["p_best"] if best else None,
        "distinguishable": report.sentence,
        "indistinguishable_from_best": len(report.indistinguishable),
        "predicted_feasible": int(opt.predicted_feasible().sum()),
        "at_theta": int(opt.at_theta().sum()),
        "feasibility_relations": [r.words() for r in report.relations],
        "acquisition": cfg.acquisition,
        "most_visits_of_one_workflow": int(visits.max()) if visits.any() else 0,
        "most_visited": most_visited(state, visits),
        "episodes_used": state.episodes_used, "total_episodes": cfg.total_episodes,
        "evaluation_episodes": state.eval_episodes,
        "visits": len(state.visits), "gp_observations": len(opt.feasible_observations()),
        "updates": state.updates, "wall_time_s": state.wall_time,
        "gp_hyperparameters": opt.models()[0].hyperparameters(),
        "feasibility_hyperparameters": opt.models()[1].hyperparameters(),
        "top": ranked[:10],
    }
    return summary


def posterior_rows(opt, report) -> list[dict]:
    """posterior.csv: every workflow's posterior, feasibility and visits."""
    post = opt.posterior()
    visits = opt.visits()
    return [
        {"Workflow": str(Workflow.from_index(w)), "Workflow_ID": w,
         "Posterior_Mean": round(float(post.mean[w]), 4),
         "Posterior_SD": round(float(post.sd[w]), 4),
         "P_Feasible": round(float(post.p_feasible[w]), 4), "Visits": int(visits[w]),
         "Tied_With_Best": int(w in report.indistinguishable)} for w in range(120)]


def describe_pick(pick: Pick, cfg: SearchConfig) -> str:
    """Why this workflow: the acquisition's numbers, in the order they combine."""
    if cfg.acquisition == "random":
        return "random pick among the unvisited"
    if math.isnan(pick.mean):
        return "initial design: the workflow farthest from all visited"
    if cfg.acquisition == "original":
        return f"original rule: UCB {pick.score:.2f} from mean {pick.mean:.2f}, sd {pick.sd:.2f}"
    text = f"reward mean {pick.mean:.2f} ± {pick.sd:.2f}, UCB {pick.ucb:.2f} (β {pick.beta:.2f})"
    if cfg.acquisition == "constrained":
        text += f", P(feasible) {pick.p_feasible:.2f}, score {pick.score:.3f}"
    return text


def format_table(summary: dict, theta: float) -> str:
    lines = [f"search done: {summary['visits']} visits, {summary['episodes_used']}/"
             f"{summary['total_episodes']} episodes, {summary['wall_time_s']:.1f} s"]
    rel = summary.get("feasibility_relations") or []
    if rel:
        lines.append(f"what decides feasibility (compliance ≥ θ = {theta}):")
        lines += [f"  {r}" for r in rel]
    line = f"predicted feasible: {summary.get('predicted_feasible', '?')} of 120 workflows"
    if summary.get("at_theta"):
        line += (f"; of the others, {summary['at_theta']} at θ (not {SURE_LEVEL:.0%} sure to "
                 "fall short: another base might follow them)")
    lines.append(line)
    if not summary["top"]:
        lines.append(f"no workflow reached compliance θ = {theta}; nothing to rank")
        return "\n".join(lines)
    lines.append(f"{'#':>2}  {'workflow':50s} {'GP mean':>8} {'± sd':>6} {'P(best)':>7} "
                 f"{'last reward':>12} {'compl.':>6} {'visits':>6} {'episodes':>8}")
    for i, r in enumerate(summary["top"][:5], 1):
        lines.append(f"{i:2d}  {r['workflow']:50s} {r['posterior_mean']:8.2f} "
                     f"{r['posterior_sd']:6.2f} {r['p_best']:7.2f} "
                     f"{r['reward']:7.2f}±{r['reward_se']:<4.2f} "
                     f"{r['compliance']:6.3f} {r['visits']:6d} {r['episodes_trained']:8d}")
    lines.append(summary["distinguishable"])
    if summary.get("most_visited"):
        lines.append(summary["most_visited"])
    return "\n".join(lines)
