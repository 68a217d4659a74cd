"""The compliance-gated GP-UCB search over workflows, resumable after any kill.

One iteration = one *visit* of a workflow: pick w by UCB over the GP posterior; train PPO on w —
from w's own policy if it was trained before, else from the closest trained workflow by Kendall
distance, else from scratch — one update of `episodes_per_update` episodes at a time, until the
update's mean compliance reaches θ (after `min_episodes`), the visit used `max_episodes`, compliance
has not improved for `patience` updates, or the search budget is spent. If the last update's
compliance reached θ, its mean env reward (with its standard error as the noise) becomes a GP
observation. Every episode of the search has a distinct global number, hence its own seeds.

Durability. `search_state.pt` is the commit point, replaced atomically after every update. It holds
the counters, the optimizer (its observations and RNG), the finished visits, the visit in
progress with its learner (weights, optimiser, shuffle RNG) and how many rows each CSV log had at
that moment. Log rows and
per-workflow checkpoints are written *before* the commit, so after a kill (even SIGKILL)
`--resume` truncates the logs to the committed row counts, restores the learner and redoes the
interrupted update — which, with episodes seeded by their global number and the learner's RNG
restored, reproduces it exactly: no episode counted twice, no log line duplicated or lost.
"""
from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

from wfrl import __version__
from wfrl.collect.base import make_collector
from wfrl.config import SearchConfig
from wfrl.envs import make_backend
from wfrl.errors import UserError
from wfrl.ppo.learner import PPOLearner
from wfrl.protocol import (BASE_POLICY, LOG_COLUMNS, base_payload, checkpoint_path,
                           evaluate_policy, log_row, policy_payload, ppo_step, pretrain)
from wfrl.rng import EVAL_EPISODE_BASE, episode_block, learner_seed
from wfrl.runlog import (CsvLog, RunDir, _atomic_write_bytes, load_checkpoint, read_csv,
                         save_checkpoint, write_json)
from wfrl.search.gp import PermutationGP, discordant_pairs
from wfrl.search.optimizer import WorkflowOptimizer
from wfrl.workflow import Workflow

STATE_FILE = "search_state.pt"
STATE_FORMAT = "wfrl/search-state"
STATE_VERSION = 2  # 2: the optimizer (reward + feasibility models) holds the observations
GP_COLUMNS = ["Iteration", "Workflow", "Workflow_ID", "UCB_Score", "Posterior_Mean",
              "Posterior_SD", "Beta", "Reward", "Reward_SE", "Final_Compliance",
              "Episodes_Trained", "GP_Updated", "Stop_Reason", "Inherited_From",
              "Total_Episodes_Sampled", "Lineage_Episodes", "P_Feasible"]


def _new_state() -> dict:
    return {"iteration": 0, "episodes_used": 0, "updates": 0, "visits": [],
            "trained": {}, "lineage": {}, "active": None,
            "pretrain": {"episodes": 0, "updates": 0, "done": False}, "rows": {"training_log": 0, "gp_sampling_log": 0},
            "wall_time": 0.0, "finished": False, "optimizer": None}


def _save_state(path: Path, meta: dict, learner_state) -> None:
    import io

    import torch
    buf = io.BytesIO()
    torch.save({"format": STATE_FORMAT, "format_version": STATE_VERSION,
                "meta": json.dumps(meta), "learner": learner_state}, buf)
    _atomic_write_bytes(path, buf.getvalue())


def load_state(path: Path) -> tuple[dict, dict | None]:
    import torch
    try:
        blob = torch.load(path, map_location="cpu", weights_only=True)
        if not isinstance(blob, dict) or blob.get("format") != STATE_FORMAT:
            raise ValueError("not a wfrl search state")
        if blob.get("format_version") != STATE_VERSION:
            raise UserError(f"cannot resume: {path} was written by an older wfrl (search state "
                            f"version {blob.get('format_version')}, this wfrl reads "
                            f"{STATE_VERSION}); start a new search")
        meta = json.loads(blob["meta"])
        for key in _new_state():
            if key not in meta:
                raise ValueError(f"missing {key!r}")
    except UserError:
        raise
    except Exception as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UserError(f"cannot resume: {path} is damaged ({reason[:100]})") from None
    meta["trained"] = {int(k): v for k, v in meta["trained"].items()}
    meta["lineage"] = {int(k): v for k, v in meta["lineage"].items()}
    return meta, blob["learner"]


def _truncate_csv(path: Path, columns: list[str], rows: int) -> None:
    """Keep the header and the first `rows` data rows (drop rows of an uncommitted update)."""
    if not path.exists():
        if rows:
            raise UserError(f"cannot resume: {path.name} is missing")
        CsvLog(path, columns)
        return
    data = read_csv(path)
    if len(data) < rows:
        raise UserError(f"cannot resume: {path.name} has {len(data)} rows, the state expects {rows}")
    if len(data) == rows:
        return
    with open(path, "rb") as f:
        lines = f.read().split(b"\n")
    _atomic_write_bytes(path, b"\n".join(lines[:rows + 1]) + b"\n")


def fit_observations(model: PermutationGP, obs: list[dict], detrend: bool) -> PermutationGP:
    """Fit the GP to the search's observations; with detrend, against log(lineage episodes) as a
    linear covariate (see wfrl.search.gp)."""
    z = [math.log1p(o.get("lineage", 0)) for o in obs] if detrend else None
    return model.fit([o["workflow"] for o in obs], [o["reward"] for o in obs],
                     [o["se"] for o in obs], covariate=z)


def closest_trained(wf_index: int, trained) -> int | None:
    """The trained workflow nearest to wf_index by Kendall distance (ties: lowest index)."""
    if not trained:
        return None
    return min(trained, key=lambda t: (discordant_pairs(wf_index, t), t))


class WorkflowSearch:
    def __init__(self, cfg: SearchConfig, resume: bool = False, progress=None):
        self.cfg = cfg.validate()
        self.progress = progress or (lambda line: print(line, file=sys.stderr, flush=True))
        self.run = Path(cfg.out)
        if resume:
            self.meta, self.learner_state = self._open_resume()
        else:
            RunDir(cfg.out, cfg.force)
            for old in [self.run / STATE_FILE, *self.run.glob("checkpoints/wf_*.pt"),
                        self.run / "checkpoints" / "base.pt"]:
                old.unlink(missing_ok=True)
            make_backend(cfg.backend, cfg.red_agent, seed=cfg.seed).close()  # fails early
            write_json(self.run / "experiment_config.json",
                       {"mode": "search", "wfrl_version": __version__, **cfg.to_dict()})
            CsvLog(self.run / "training_log.csv", LOG_COLUMNS)
            CsvLog(self.run / "gp_sampling_log.csv", GP_COLUMNS)
            self.meta, self.learner_state = _new_state(), None
            self._commit(None)
        (self.run / "checkpoints").mkdir(exist_ok=True)
        self.train_log = CsvLog(self.run / "training_log.csv", LOG_COLUMNS, fresh=False)
        self.gp_log = CsvLog(self.run / "gp_sampling_log.csv", GP_COLUMNS, fresh=False)
        cfg = self.cfg
        self.opt = (WorkflowOptimizer.from_state(self.meta["optimizer"]) if self.meta["optimizer"]
                    else WorkflowOptimizer(cfg.acquisition, cfg.compliance_threshold, cfg.beta,
                                           cfg.seed, cfg.detrend))

    # ---------------------------------------------------------------- state
    def _open_resume(self):
        state_path = self.run / STATE_FILE
        if not state_path.exists():
            raise UserError(f"cannot resume: {self.run} holds no search state ({STATE_FILE})")
        meta, learner_state = load_state(state_path)
        if meta["finished"]:
            raise UserError(f"nothing to resume: the search in {self.run} has finished")
        make_backend(self.cfg.backend, self.cfg.red_agent, seed=self.cfg.seed).close()
        _truncate_csv(self.run / "training_log.csv", LOG_COLUMNS, meta["rows"]["training_log"])
        _truncate_csv(self.run / "gp_sampling_log.csv", GP_COLUMNS,
                      meta["rows"]["gp_sampling_log"])
        mid_pretraining = not meta["pretrain"]["done"] and meta["pretrain"]["episodes"] > 0
        if (meta["active"] is not None or mid_pretraining) and learner_state is None:
            raise UserError(f"cannot resume: {state_path} lacks the learner of the active visit")
        self.progress(f"resuming {self.run}: {meta['episodes_used']} of "
                      f"{self.cfg.total_episodes} episodes used, {len(meta['visits'])} visits done")
        return meta, learner_state

    def _commit(self, learner) -> None:
        m = self.meta
        m["wall_time"] = round(self._wall_before + time.perf_counter() - self._t0, 3) \
            if hasattr(self, "_t0") else m["wall_time"]
        _save_state(self.run / STATE_FILE, m, learner.state() if learner is not None else None)

    # ---------------------------------------------------------------- pieces
    def choose(self, iteration: int) -> dict:
        """The optimizer's next workflow and the numbers behind the choice (its state, RNG
        included, is committed with the visit, so a resumed run asks the same)."""
        self.opt.ask()
        self.meta["optimizer"] = self.opt.state_dict()
        a = self.opt.last_ask
        return {"workflow": a["workflow"], "ucb": a["score"], "mu": a["mu"], "sd": a["sd"],
                "beta": a["beta"], "p_feasible": a["p_feasible"], "raw_ucb": a["ucb"]}

    def _learner_for(self, wf_index: int, iteration: int) -> tuple[PPOLearner, int | None]:
        learner = PPOLearner(self.cfg.ppo, seed=learner_seed(self.cfg.seed, iteration))
        trained = self.meta["trained"]
        if wf_index in trained and self.cfg.inherit != "base":
            learner.load_state(load_checkpoint(checkpoint_path(self.run, wf_index)))
            return learner, wf_index
        parent = closest_trained(wf_index, trained) if self.cfg.inherit == "closest" else None
        if parent is None and self.cfg.inherit != "scratch" and self.meta["pretrain"]["done"] \
                and checkpoint_path(self.run, BASE_POLICY).exists():
            parent = BASE_POLICY
        if parent is not None:
            ck = load_checkpoint(checkpoint_path(self.run, parent))
            learner.model.load_state_dict(ck["model"])  # weights only; a fresh optimiser
        return learner, parent

    def _save_workflow(self, learner, wf: Workflow) -> None:
        save_checkpoint(checkpoint_path(self.run, wf.index), policy_payload(
            learner, self.cfg.ppo, str(wf), wf.index,
            episodes=self.meta["trained"].get(wf.index, 0), config=self.cfg.to_dict()))

    # ---------------------------------------------------------------- loop
    def run_search(self) -> dict:
        cfg, m = self.cfg, self.meta
        M = cfg.episodes_per_update
        self._t0, self._wall_before = time.perf_counter(), float(m["wall_time"])
        self._eps0 = m["episodes_used"]
        collector = make_collector(cfg.resolved_collector(), cfg.backend, cfg.red_agent,
                                   cfg.ppo.net(), cfg.seed, cfg.alignment_lambda,
                                   cfg.count_foothold, cfg.n_workers, M,
                                   ray_address=cfg.ray_address)
        learner = None
        try:
            if self.learner_state is not None:
                learner = PPOLearner(cfg.ppo, seed=0)
                learner.load_state(self.learner_state)
            learner = self._pretrain(collector, learner)
            while True:
                if m["active"] is None:
                    if m["episodes_used"] >= cfg.total_episodes or (
                            cfg.max_evaluations and m["iteration"] >= cfg.max_evaluations):
                        break
                    m["iteration"] += 1
                    pick = self.choose(m["iteration"])
                    learner, parent = self._learner_for(pick["workflow"], m["iteration"])
                    m["active"] = {**pick, "iteration": m["iteration"], "episodes": 0,
                                   "updates": 0, "best_compliance": -1.0, "since_best": 0,
                                   "recent": [],
                                   "inherited_from": parent, "last": None,
                                   "lineage_start": self._lineage(parent)}
                    wf = Workflow.from_index(pick["workflow"])
                    src = ("its own policy" if parent == pick["workflow"] else
                           "the pretrained base" if parent == BASE_POLICY else
                           f"{Workflow.from_index(parent)}" if parent is not None else "scratch")
                    self.progress(f"[visit {m['iteration']}] {wf}  ({describe_pick(pick, cfg)}; "
                                  f"from {src})")
                    self._commit(learner)
                a = m["active"]
                wf = Workflow.from_index(a["workflow"])
                n = min(M, cfg.total_episodes - m["episodes_used"], cfg.max_episodes - a["episodes"])
                row_cond = np.tile(wf.onehot(), (M, 1))
                eps, ustats, tc, tu = ppo_step(collector, learner, wf, row_cond,
                                               m["episodes_used"], n, cfg.ppo)
                m["episodes_used"] += n
                m["updates"] += 1
                a["episodes"] += n
                a["updates"] += 1
                m["trained"][wf.index] = m["trained"].get(wf.index, 0) + n
                row = log_row(wf, a["updates"], a["episodes"], m["episodes_used"], eps, ustats,
                              tc, tu, learner.version, phase="visit")
                self.train_log.append(row)
                m["rows"]["training_log"] += 1
                # A visit's compliance is the mean of its last `compliance_window` updates: one
                # update crossing θ by noise does not make a workflow feasible.
                a["recent"].append(row["Compliance"])
                a["recent"] = a["recent"][-cfg.compliance_window:]
                comp = round(float(np.mean(a["recent"])), 4)
                a["last"] = {"reward": row["Env_Reward"], "se": row["Env_Reward_SE"],
                             "compliance": comp, "n": n}
                if comp > a["best_compliance"]:
                    a["best_compliance"], a["since_best"] = comp, 0
                else:
                    a["since_best"] += 1
                left = cfg.total_episodes - m["episodes_used"]
                self.progress(f"  {wf.arrow()} | update {a['updates']:3d} | "
                              f"{self._rate():6.1f} eps/s | reward {row['Env_Reward']:8.2f}"
                              f" ± {row['Env_Reward_SE']:5.2f} | compliance {comp:.3f} | "
                              f"budget left {left}")
                stop = None
                if a["episodes"] >= cfg.min_episodes and comp >= cfg.compliance_threshold:
                    stop = "compliant"
                elif a["episodes"] >= cfg.max_episodes:
                    stop = "max_episodes"
                elif a["since_best"] >= cfg.patience:
                    stop = "plateau"
                elif left <= 0:
                    stop = "budget"
                if stop is not None:
                    self._finish_visit(learner, wf, stop, collector)
                    learner = None
                self._commit(learner)
        except KeyboardInterrupt:
            self.progress(f"stopped; every completed update is saved. Continue with: "
                          f"python -m wfrl train --resume {self.run}")
            raise
        finally:
            collector.close()
        return self._finish()

    def _lineage(self, parent) -> int:
        """Training episodes behind the policy a visit starts from (its whole ancestry)."""
        if parent is None:
            return 0
        if parent == BASE_POLICY:
            return self.meta["pretrain"]["episodes"]
        return self.meta["lineage"][parent]

    def _rate(self) -> float:
        """Episodes per second in this session (since start or resume), updates included."""
        return (self.meta["episodes_used"] - self._eps0) / max(time.perf_counter() - self._t0, 1e-9)

    def _pretrain(self, collector, learner):
        """Pretraining phase (resumable per update); returns None once the base is saved."""
        cfg, m = self.cfg, self.meta
        p = m["pretrain"]
        if p["done"]:
            return learner
        total = min(cfg.pretrain_episodes, cfg.total_episodes)
        if learner is None:
            learner = PPOLearner(cfg.ppo, seed=learner_seed(cfg.seed))
        if p["episodes"] == 0 and total > 0:
            self.progress(f"[pretraining] {total} episodes, one random workflow per update")
        M = cfg.episodes_per_update
        start = m["episodes_used"] - p["episodes"]
        for wf, n, eps, ustats, tc, tu in pretrain(collector, learner, cfg.ppo, cfg.seed, start,
                                                   p["episodes"], total, M, p["updates"]):
            m["episodes_used"] += n
            p["episodes"] += n
            p["updates"] += 1
            m["updates"] += 1
            row = log_row(wf, p["updates"], p["episodes"], m["episodes_used"], eps, ustats, tc, tu,
                          learner.version, phase="pretrain")
            self.train_log.append(row)
            m["rows"]["training_log"] += 1
            self.progress(f"  pretraining | update {p['updates']:3d} | {self._rate():6.1f} eps/s | "
                          f"reward {row['Env_Reward']:8.2f} ± {row['Env_Reward_SE']:5.2f} | "
                          f"compliance {row['Compliance']:.3f} | budget left "
                          f"{cfg.total_episodes - m['episodes_used']}")
            self._commit(learner)
        if total > 0:
            save_checkpoint(checkpoint_path(self.run, BASE_POLICY),
                            base_payload(learner, cfg.ppo, p["episodes"], config=cfg.to_dict()))
        p["done"] = True
        self._commit(None)
        return None

    def _finish_visit(self, learner, wf: Workflow, stop: str, collector) -> None:
        m, a = self.meta, self.meta["active"]
        lineage = a["lineage_start"] + a["episodes"]
        m["lineage"][wf.index] = lineage
        self._save_workflow(learner, wf)
        last = a["last"]
        cfg = self.cfg
        # The optimizer is told every visit that trained its minimum and whose last update was
        # not a stub cut short by the budget (a handful of episodes would enter as a near-exact
        # observation): the feasibility model learns from its compliance, and the reward model
        # from its reward if compliance reached θ.
        complete = (a["episodes"] >= cfg.min_episodes
                    and last.get("n", cfg.episodes_per_update)
                    >= max(2, min(cfg.episodes_per_update, cfg.max_episodes) // 2))
        gp_updated = complete and last["compliance"] >= cfg.compliance_threshold
        evaluation = None
        if gp_updated and cfg.gp_eval_episodes > 0:
            # episode numbers reserved for evaluation, distinct per visit, never used by training
            evaluation = evaluate_policy(collector, learner, wf,
                                         episode_block(EVAL_EPISODE_BASE, a["iteration"]),
                                         cfg.gp_eval_episodes, cfg.episodes_per_update)
            last = {**last, "reward": evaluation["reward"], "se": evaluation["se"]}
            m["eval_episodes"] = m.get("eval_episodes", 0) + cfg.gp_eval_episodes
        if complete:
            self.opt.tell(wf, last["reward"], last["se"], last["compliance"], lineage)
            m["optimizer"] = self.opt.state_dict()
        visit = {"iteration": a["iteration"], "workflow": wf.index, "ucb": a["ucb"],
                 "episodes": a["episodes"], "reward": last["reward"], "se": last["se"],
                 "compliance": last["compliance"], "gp_updated": gp_updated, "stop": stop,
                 "inherited_from": a["inherited_from"],
                 "train_reward": a["last"]["reward"], "evaluation": evaluation}
        m["visits"].append(visit)
        self.gp_log.append({
            "Iteration": a["iteration"], "Workflow": str(wf), "Workflow_ID": wf.index,
            "UCB_Score": round(a["ucb"], 4), "Posterior_Mean": round(a["mu"], 4),
            "Posterior_SD": round(a["sd"], 4), "Beta": round(a["beta"], 4),
            "Reward": last["reward"], "Reward_SE": last["se"],
            "Final_Compliance": last["compliance"], "Episodes_Trained": a["episodes"],
            "GP_Updated": gp_updated, "Stop_Reason": stop,
            "Inherited_From": "" if a["inherited_from"] is None else
            "base" if a["inherited_from"] == BASE_POLICY else
            str(Workflow.from_index(a["inherited_from"])),
            "Total_Episodes_Sampled": m["episodes_used"], "Lineage_Episodes": lineage,
            "P_Feasible": "" if a.get("p_feasible") is None or math.isnan(a["p_feasible"])
            else round(a["p_feasible"], 4)})
        m["rows"]["gp_sampling_log"] += 1
        m["active"] = None
        why = ("" if gp_updated else
               f"  (below θ = {cfg.compliance_threshold}: the feasibility model learns from it, "
               "the reward model does not)" if complete else
               f"  (cut short by the budget after {a['episodes']} episodes: not given to the "
               "models)")
        self.progress(f"  → {stop}: reward {last['reward']:.2f} ± {last['se']:.2f}, compliance "
                      f"{last['compliance']:.3f} after {a['episodes']} episodes" + why)

    def ranking(self, report) -> list[dict]:
        """Workflows the optimizer vouches for (a visit reached θ and it still predicts them
        feasible), best first by posterior mean, with their probability of being the best."""
        post = self.opt.posterior()
        mu, sd, pf = post.mean, post.sd, post.p_feasible
        obs = self.opt.feasible_observations()
        visits = self.opt.visits()
        rows = {}
        for v in self.meta["visits"]:
            if v["gp_updated"]:
                rows[v["workflow"]] = v  # the latest compliant visit
        out = []
        for w in report.candidates:
            v = rows[w]
            rs = [o["reward"] for o in obs if o["workflow"] == w]
            out.append({"_mu": float(mu[w]), "workflow": str(Workflow.from_index(w)),
                        "workflow_id": w,
                        "posterior_mean": round(float(mu[w]), 3),
                        "posterior_sd": round(float(sd[w]), 3),
                        "p_best": round(report.p_best.get(w, 0.0), 3),
                        "p_feasible": round(float(pf[w]), 3),
                        "reward": v["reward"], "reward_se": v["se"],
                        "mean_observed_reward": round(float(np.mean(rs)), 3),
                        "compliance": v["compliance"], "visits": int(visits[w]),
                        "episodes_trained": self.meta["trained"].get(w, 0)})
        out.sort(key=lambda r: (-r["_mu"], r["workflow_id"]))
        for r in out:
            del r["_mu"]
        return out

    def _most_visited(self, visits) -> str | None:
        """When one workflow took more than a third of the visits: the acquisition's numbers at
        each of its visits, so a reader can judge whether they justified it."""
        if not visits.any() or visits.max() * 3 <= len(self.meta["visits"]):
            return None
        w = int(np.argmax(visits))
        rows = [v for v in self.meta["visits"] if v["workflow"] == w]
        scores = ", ".join(f"{v['ucb']:.3f}" for v in rows)
        return (f"{Workflow.from_index(w).arrow()} took {len(rows)} of {len(self.meta['visits'])} "
                f"visits; each time its acquisition score was the highest of the 120 "
                f"(scores {scores}; per visit: gp_sampling_log.csv)")

    def _finish(self) -> dict:
        m, cfg = self.meta, self.cfg
        report = self.opt.report()
        ranking = self.ranking(report)
        best = ranking[0] if ranking else None
        post = self.opt.posterior()
        visits = self.opt.visits()
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
            "predicted_feasible": int((post.p_feasible >= 0.5).sum()),
            "feasibility_relations": [r.words() for r in report.relations],
            "acquisition": cfg.acquisition,
            "most_visits_of_one_workflow": int(visits.max()) if visits.any() else 0,
            "most_visited": self._most_visited(visits),
            "episodes_used": m["episodes_used"], "total_episodes": cfg.total_episodes,
            "evaluation_episodes": m.get("eval_episodes", 0),
            "visits": len(m["visits"]), "gp_observations": len(self.opt.feasible_observations()),
            "updates": m["updates"], "wall_time_s": m["wall_time"],
            "gp_hyperparameters": self.opt.models()[0].hyperparameters(),
            "feasibility_hyperparameters": self.opt.models()[1].hyperparameters(),
            "top": ranking[:10],
        }
        write_json(self.run / "summary.json", summary)
        from wfrl.search.plots import plot_run
        plot_run(self.run, self.opt, report)
        m["finished"] = True  # last: a kill before this commit leaves a resumable run
        self._commit(None)
        self.progress(format_table(summary, cfg.compliance_threshold))
        self.progress(f"records in {self.run}")
        return summary


def describe_pick(pick: dict, cfg: SearchConfig) -> str:
    """Why this workflow: the acquisition's numbers, in the order they combine."""
    if cfg.acquisition == "random":
        return "random pick among the unvisited"
    if math.isnan(pick["mu"]):
        return "initial design: the workflow farthest from all visited"
    if cfg.acquisition == "original":
        return f"original rule: UCB {pick['ucb']:.2f} from mean {pick['mu']:.2f}, sd {pick['sd']:.2f}"
    text = (f"reward mean {pick['mu']:.2f} ± {pick['sd']:.2f}, UCB {pick['raw_ucb']:.2f} "
            f"(β {pick['beta']:.2f})")
    if cfg.acquisition == "constrained":
        text += f", P(feasible) {pick['p_feasible']:.2f}, score {pick['ucb']:.3f}"
    return text


def format_table(summary: dict, theta: float) -> str:
    lines = [f"search done: {summary['visits']} visits, {summary['episodes_used']}/"
             f"{summary['total_episodes']} episodes, {summary['wall_time_s']:.1f} s"]
    rel = summary.get("feasibility_relations") or []
    if rel:
        lines.append(f"what decides feasibility (compliance ≥ θ = {theta}):")
        lines += [f"  {r}" for r in rel]
    lines.append(f"predicted feasible: {summary.get('predicted_feasible', '?')} of 120 workflows")
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


def search(cfg: SearchConfig, resume: bool = False, progress=None) -> dict:
    return WorkflowSearch(cfg, resume=resume, progress=progress).run_search()


def resume_config(run_dir: str, overrides: dict | None = None) -> SearchConfig:
    """The configuration stored in a run directory (with runtime-only overrides such as the
    collector, which do not change results)."""
    path = Path(run_dir) / "experiment_config.json"
    if not Path(run_dir).is_dir():
        raise UserError(f"cannot resume: {run_dir} is not a directory")
    if not path.exists():
        raise UserError(f"cannot resume: {run_dir} holds no experiment_config.json")
    try:
        d = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot resume: {path} is unreadable or not JSON ({exc})") from None
    if not isinstance(d, dict) or d.get("mode") != "search":
        raise UserError(f"cannot resume: {run_dir} is not a workflow-search run")
    d = {k: v for k, v in d.items() if k not in ("mode", "wfrl_version")}
    d["out"] = os.fspath(run_dir)
    d.update(overrides or {})
    return SearchConfig.from_dict(d)

