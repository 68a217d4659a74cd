"""The compliance-gated GP-UCB search over workflows, resumable after any kill.

One iteration = one *visit* of a workflow: the optimizer picks w (wfrl.search.optimizer); PPO
trains on w from a starting policy (--inherit: the pretrained base, the closest trained workflow
by Kendall distance, or scratch), one update of `episodes_per_update` episodes at a time, until
the visit's compliance (the mean over its last `compliance_window` updates) reaches θ (after
`min_episodes`), the visit used `max_episodes`, compliance has not improved for `patience`
updates, or the search budget is spent. The optimizer is then told the visit's compliance and,
if it reached θ, its reward. Every episode of the search has a distinct global number, hence its
own seeds.

The steps, as WorkflowSearch runs them: pretrain (warm-up on random workflows, saved as the base
policy) → pick the next workflow and its starting policy → train the visit, one update at a time
→ record the ended visit (checkpoint, optimizer, gp_sampling_log.csv) → … → close (summary.json,
plots, the table).

Durability. `search_state.pt` (wfrl.search.state) is the commit point, replaced atomically after
every update. It holds the counters, the optimizer (its observations and RNG), the ended visits,
the visit in training with its learner (weights, optimiser, shuffle RNG) and how many rows each
CSV log had at that moment. Log rows and per-workflow checkpoints are written *before* the
commit, so after a kill (even SIGKILL) `--resume` truncates the logs to the committed row counts,
restores the learner and redoes the interrupted update — which, with episodes seeded by their
global number and the learner's RNG restored, reproduces it exactly: no episode counted twice, no
log line duplicated or lost.
"""
from __future__ import annotations

import dataclasses
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from wfrl._version import __version__
from wfrl.collect.base import make_collector
from wfrl.collect.resources import check_workers_fit
from wfrl.config.run import SearchConfig
from wfrl.envs import make_backend
from wfrl.envs.base import EP_LEN
from wfrl.errors import UserError
from wfrl.ppo.learner import PPOLearner
from wfrl.rng import learner_seed
from wfrl.runlog import (
    BASE_POLICY,
    CsvLog,
    RunDir,
    TensorBoardLog,
    checkpoint_path,
    eta,
    load_checkpoint,
    locked_dir,
    save_checkpoint,
    truncate_csv,
    write_csv_atomic,
    write_json,
)
from wfrl.search.gp import PermutationGP, discordant_pairs
from wfrl.search.inflight import VisitsInFlight, visit_source
from wfrl.search.optimizer import WorkflowOptimizer
from wfrl.search.report import POSTERIOR_COLUMNS, describe_pick, format_table, posterior_rows, search_summary
from wfrl.search.state import STATE_FILE, Pick, SearchState, StateWriter, Visit, load_state
from wfrl.search.visits import measure_visit, visit_update
from wfrl.training.steps import (
    LOG_COLUMNS,
    LearnerSteps,
    base_payload,
    behaviour_version,
    log_row,
    policy_payload,
    pretrain,
)
from wfrl.workflow import Workflow

# posterior.csv, written when a search ends: what the models say of each of the 120 workflows
GP_COLUMNS = ["Iteration", "Workflow", "Workflow_ID", "UCB_Score", "Posterior_Mean",
              "Posterior_SD", "Beta", "Reward", "Reward_SE", "Final_Compliance",
              "Episodes_Trained", "GP_Updated", "Stop_Reason", "Inherited_From",
              "Total_Episodes_Sampled", "Lineage_Episodes", "P_Feasible"]


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


class WorkflowSearch(VisitsInFlight):
    """One search in the run directory cfg.out: a new one, or (resume=True) the one whose last
    commit is there; run_search() runs it to the end and returns its summary."""

    def __init__(self, cfg: SearchConfig, resume: bool = False, progress=None,
                 pooled: bool | None = None):
        """pooled: train the visits in a pool (wfrl.search.concurrent) even with K = 1, one in
        flight at a time (default: with --concurrent-visits K > 1)."""
        self.cfg = cfg.validate()
        self.pooled = cfg.concurrent_visits > 1 if pooled is None else bool(pooled)
        self.progress = progress or (lambda line: print(line, file=sys.stderr, flush=True))
        self.run = Path(cfg.out)
        self._t0: float | None = None  # start of this session (run_search)
        self.steps: LearnerSteps | None = None  # LearnerSteps of run_search
        # the collector of run_search (the warm-up's, then the search's; Any: make_collector's
        # collectors have a `lam` the Collector protocol does not declare)
        self.collector: Any = None
        self._writer = StateWriter()   # the commits (_commit)
        self._eval_backends: dict = {}   # red -> backend of the greedy visit evaluations
        if resume:
            self.state, self.learner_state = self._open_resume()
        else:
            self._start_new()
        (self.run / "checkpoints").mkdir(exist_ok=True)
        self.train_log = CsvLog(self.run / "training_log.csv", LOG_COLUMNS, fresh=False)
        self.curves = (TensorBoardLog(cfg.tensorboard, self.state.episodes_used * EP_LEN + 1
                                      if resume else None) if cfg.tensorboard else None)
        self.gp_log = CsvLog(self.run / "gp_sampling_log.csv", GP_COLUMNS, fresh=False)
        cfg = self.cfg
        self.opt = (WorkflowOptimizer.from_state(self.state.optimizer) if self.state.optimizer
                    else WorkflowOptimizer(cfg.acquisition, cfg.compliance_threshold, cfg.beta,
                                           cfg.seed, cfg.detrend))

    # ---------------------------------------------------------------- state
    def _start_new(self) -> None:
        cfg = self.cfg
        RunDir(cfg.out, cfg.force)
        for old in [self.run / STATE_FILE, *self.run.glob("checkpoints/wf_*.pt"),
                    *self.run.glob("checkpoints/start_*.pt"),
                    self.run / "checkpoints" / "base.pt"]:
            old.unlink(missing_ok=True)
        make_backend(cfg.backend, cfg.red_agent, seed=cfg.seed).close()  # fails early
        from wfrl.ppo.learner import update_step_name
        write_json(self.run / "experiment_config.json",
                   {"mode": "search", "wfrl_version": __version__,
                    "update_step": update_step_name(cfg.ppo), **cfg.to_dict()})
        CsvLog(self.run / "training_log.csv", LOG_COLUMNS)
        CsvLog(self.run / "gp_sampling_log.csv", GP_COLUMNS)
        self.state, self.learner_state = SearchState(), None
        self._commit(None)
        self._writer.flush()

    def _open_resume(self) -> tuple[SearchState, dict | None]:
        state_path = self.run / STATE_FILE
        if not state_path.exists():
            raise UserError(f"cannot resume: {self.run} holds no search state ({STATE_FILE})")
        state, learner_state = load_state(state_path)
        if state.finished:
            raise UserError(f"nothing to resume: the search in {self.run} has finished")
        make_backend(self.cfg.backend, self.cfg.red_agent, seed=self.cfg.seed).close()
        truncate_csv(self.run / "training_log.csv", LOG_COLUMNS, state.training_log_rows)
        truncate_csv(self.run / "gp_sampling_log.csv", GP_COLUMNS, state.gp_log_rows)
        mid_pretraining = not state.pretraining.done and state.pretraining.episodes > 0
        if (state.active is not None or mid_pretraining) and learner_state is None:
            raise UserError(f"cannot resume: {state_path} lacks the learner of the active visit")
        self.progress(f"resuming {self.run}: {state.episodes_used} of "
                      f"{self.cfg.total_episodes} episodes used, {len(state.visits)} visits done")
        return state, learner_state

    def _commit(self, learner) -> None:
        """Write the state (with the learner in training, if any): the commit point. With overlap,
        the weights the batch being collected ahead plays with are committed too, so a resumed
        run collects that batch with them and continues as the uninterrupted run would."""
        if self._t0 is not None:
            self.state.wall_time = round(self._wall_before + time.perf_counter() - self._t0, 3)
        learner_state = learner.state() if learner is not None else None
        ahead = self.steps.behaviour if self.steps is not None else None
        if learner_state is not None and ahead:
            import torch
            learner_state["behaviour"] = {"weights": torch.from_numpy(ahead[0].copy()),
                                          "version": int(ahead[1])}
        self._writer.write(self.run / STATE_FILE, self.state, learner_state)

    # ---------------------------------------------------------------- the search
    def run_search(self) -> dict:
        state, cfg = self.state, self.cfg
        self._t0, self._wall_before = time.perf_counter(), float(state.wall_time)
        self._episodes_at_start = state.episodes_used
        concurrent = self.pooled
        if not (concurrent and (state.pretraining.done
                                or cfg.base not in ("auto", "pretrain"))):
            self._open_collector(self._alignment_now())
        self._pool = None
        try:
            learner = self._restore_learner()
            learner = self._pretrain(learner)
            if concurrent:
                self._close_collector()
                self._run_concurrent()
            else:
                while state.active is not None or not self._budget_spent():
                    if state.active is None:
                        learner = self._pick_next()
                    stop = self._train_update(self.collector, learner)
                    if stop is not None:
                        self._record_visit(self.collector, learner, stop)
                        learner = None
                    self._commit(learner)
        except KeyboardInterrupt:
            self._abort()
            self._writer.settle()    # the last commit on disk before saying so
            what = "visit told" if concurrent else "update"
            self.progress(f"stopped; every completed {what} is saved. Continue with: "
                          f"python -m wfrl train --resume {self.run}")
            raise
        except BaseException:
            self._abort()
            self._writer.settle()
            raise
        finally:
            if self._pool is not None:
                self._pool.close()
                self._pool = None
            self._close_collector()
            for backend in self._eval_backends.values():
                backend.close()
            self._eval_backends.clear()
            if self.curves is not None:
                self.curves.close()
        self._writer.flush()
        return self._close()

    def _abort(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None
        if self.steps is not None:
            self.steps.abort()

    def _close_collector(self) -> None:
        if self.steps is not None:
            self.steps.cancel()
        collector, self.collector = self.collector, None
        if collector is not None:
            collector.close()

    def _open_collector(self, lam: float) -> None:
        """The collector (and its LearnerSteps) that plays with alignment weight `lam`."""
        cfg = self.cfg
        self.collector = make_collector(cfg.resolved_collector(), cfg.backend, cfg.red_agent,
                                        cfg.ppo.net(), cfg.seed, lam, cfg.count_foothold,
                                        cfg.n_workers, cfg.episodes_per_update,
                                        ray_address=cfg.ray_address)
        self.steps = LearnerSteps(self.collector, cfg.ppo, overlap=cfg.overlap,
                                  threads=cfg.learner_threads)

    def _alignment_now(self) -> float:
        """The alignment weight the run plays with now: 0 inside the pretraining's warm-up
        (--pretrain-warmup), the search's λ from its end on."""
        pretraining = self.state.pretraining
        warm = not pretraining.done and pretraining.episodes < self.cfg.warmup_episodes()
        return 0.0 if warm else self.cfg.alignment_lambda

    def _match_collector(self) -> None:
        """Reopen the collector if it plays with another alignment weight than _alignment_now()
        (at the warm-up's end; nothing is collected ahead across the switch)."""
        if self.collector.lam != self._alignment_now():
            assert self.steps is not None   # (opened with the collector)
            self.steps.cancel()
            old, self.collector = self.collector, None   # (closed once, whatever happens next)
            old.close()
            self._open_collector(self._alignment_now())

    def _restore_learner(self) -> PPOLearner | None:
        """The learner committed with the state (mid-pretraining or mid-visit), if any, and the
        weights its next batch was being collected with (an overlapped run), in self._behaviour."""
        self._behaviour = None
        if self.learner_state is None:
            return None
        learner = PPOLearner(self.cfg.ppo, seed=0)
        learner.load_state(self.learner_state)
        if self.state.active is not None:
            learner.set_progress(1.0)   # a visit's schedule (pretraining sets its own per update)
        ahead = self.learner_state.get("behaviour")
        if ahead is not None:
            self._behaviour = (ahead["weights"].numpy().astype(np.float32),
                               int(ahead["version"]))
        return learner

    def _take_behaviour(self):
        behaviour, self._behaviour = self._behaviour, None
        return behaviour

    def _budget_spent(self) -> bool:
        cfg, state = self.cfg, self.state
        return state.episodes_used >= cfg.total_episodes or bool(
            cfg.max_evaluations and state.iteration >= cfg.max_evaluations)

    def _rate(self) -> float:
        """Episodes per second in this session (since start or resume), updates included."""
        assert self._t0 is not None   # (set by run_search)
        return ((self.state.episodes_used - self._episodes_at_start)
                / max(time.perf_counter() - self._t0, 1e-9))

    def _eta(self) -> str:
        """ETA of the budget left at this session's rate (visit evaluations and fits aside)."""
        return f"ETA {eta(self.cfg.total_episodes - self.state.episodes_used, self._rate())}"

    # ---------------------------------------------------------------- step 1: pretrain
    def _pretrain(self, learner):
        """Pretraining phase (resumable per update); returns None once the base is saved. Its
        first cfg.warmup_episodes() play on a collector without the compliance reward, the rest
        (and the search) on the search's own."""
        cfg, state = self.cfg, self.state
        pretraining = state.pretraining
        if pretraining.done:
            return learner
        if cfg.base not in ("auto", "pretrain"):   # a conditioned policy given: the base as is
            self._adopt_base(cfg.base)
            return None
        total = min(cfg.pretrain_episodes, cfg.total_episodes)
        warmup = cfg.warmup_episodes()
        if learner is None:
            learner = PPOLearner(cfg.ppo, seed=learner_seed(cfg.seed))
        if pretraining.episodes == 0 and total > 0:
            self.progress(f"[pretraining] {total} episodes, one random workflow per update"
                          + (f"; the first {warmup} without the compliance reward"
                             if warmup else ""))
        first_episode = state.episodes_used - pretraining.episodes
        for until in (warmup, total):
            if pretraining.episodes >= until:
                continue
            self._match_collector()
            assert self.steps is not None   # (opened by run_search)
            for wf, n, eps, ustats, t_collect, t_update in pretrain(
                    self.steps, learner, cfg.seed, first_episode, pretraining.episodes,
                    total, cfg.episodes_per_update, pretraining.updates,
                    behaviour=self._take_behaviour(), until=until):
                state.episodes_used += n
                pretraining.episodes += n
                pretraining.updates += 1
                state.updates += 1
                row = log_row(wf, pretraining.updates, pretraining.episodes,
                              state.episodes_used, eps, ustats, t_collect, t_update,
                              behaviour_version(eps), phase="pretrain",
                              first_fix=self.steps.first_fix)
                self._log_update(row, ustats)
                self.progress(f"  pretraining | update {pretraining.updates:3d} | "
                              f"{self._rate():6.1f} eps/s | "
                              f"reward {row['Env_Reward']:8.2f} ± {row['Env_Reward_SE']:5.2f} | "
                              f"compliance {row['Compliance']:.3f} | budget left "
                              f"{cfg.total_episodes - state.episodes_used} | {self._eta()}")
                self._commit(learner)
        self._match_collector()   # (a warm-up as long as the pretraining ends here)
        if total > 0:
            save_checkpoint(checkpoint_path(self.run, BASE_POLICY),
                            base_payload(learner, cfg.ppo, pretraining.episodes,
                                         config=cfg.to_dict()))
        pretraining.done = True
        self._commit(None)
        return None

    def _adopt_base(self, source: str) -> None:
        """The conditioned policy `source` as the base every visit starts from (its weights;
        checked against the search's settings), in place of a pretraining."""
        from wfrl.search.bases import checked_base
        ck = checked_base(self.cfg, source)
        learner = PPOLearner(self.cfg.ppo, seed=learner_seed(self.cfg.seed))
        learner.model.load_state_dict(ck["model"])
        save_checkpoint(checkpoint_path(self.run, BASE_POLICY),
                        base_payload(learner, self.cfg.ppo, int(ck.get("episodes", 0)),
                                     config=self.cfg.to_dict()))
        self.state.pretraining.done = True
        self._commit(None)

    # ---------------------------------------------------------------- step 2: pick the next
    def _pick_next(self) -> PPOLearner:
        """Start the next visit: the optimizer's pick and the policy it starts from (committed
        with the optimizer's state, RNG included, so a resumed run asks the same)."""
        state = self.state
        pick = self._ask()
        learner, parent = self._learner_for(pick.workflow, state.iteration)
        state.active = Visit(iteration=state.iteration, pick=pick, inherited_from=parent,
                             lineage_start=self._lineage(parent))
        self.progress(f"[visit {state.iteration}] {Workflow.from_index(pick.workflow)}  "
                      f"({describe_pick(pick, self.cfg)}; from {visit_source(parent, pick.workflow)})")
        self._commit(learner)
        return learner

    def _ask(self, pending=()) -> Pick:
        """The next visit's number (state.iteration) and the optimizer's pick, the workflows of
        `pending` pending; the optimizer's state, RNG included, goes into the state to be
        committed, so a resumed run asks the same."""
        state = self.state
        state.iteration += 1
        self.opt.ask(pending=pending)
        state.optimizer = self.opt.state_dict()
        asked = self.opt.last_ask
        assert asked is not None   # (set by ask)
        return Pick(workflow=asked["workflow"], score=asked["score"], mean=asked["mu"],
                    sd=asked["sd"], ucb=asked["ucb"], beta=asked["beta"],
                    p_feasible=asked["p_feasible"])

    def _learner_for(self, wf_index: int, iteration: int) -> tuple[PPOLearner, int | None]:
        """A visit's learner and where it starts from (see --inherit)."""
        cfg = self.cfg
        learner = PPOLearner(cfg.ppo, seed=learner_seed(cfg.seed, iteration))
        learner.set_progress(1.0)   # visits train at the end of the pretraining's schedules
        parent = self._parent_for(wf_index)
        if parent == wf_index:
            learner.load_state(load_checkpoint(checkpoint_path(self.run, wf_index)))
        elif parent is not None:
            ck = load_checkpoint(checkpoint_path(self.run, parent))
            learner.model.load_state_dict(ck["model"])  # weights only; a fresh optimiser
        return learner, parent

    def _parent_for(self, wf_index: int) -> int | None:
        """Where a visit of wf_index starts (see --inherit): its own policy (wf_index; the
        learner's whole state), another workflow's or the base's weights, or None (scratch)."""
        cfg, trained = self.cfg, self.state.trained
        if wf_index in trained and cfg.inherit != "base":
            return wf_index
        parent = closest_trained(wf_index, trained) if cfg.inherit == "closest" else None
        if parent is None and cfg.inherit != "scratch" and self.state.pretraining.done \
                and checkpoint_path(self.run, BASE_POLICY).exists():
            parent = BASE_POLICY
        return parent

    def _lineage(self, parent) -> int:
        """Training episodes behind the policy a visit starts from (its whole ancestry)."""
        if parent is None:
            return 0
        if parent == BASE_POLICY:
            return self.state.pretraining.episodes
        return self.state.lineage[parent]

    # ---------------------------------------------------------------- step 3: train the visit
    def _train_update(self, collector, learner) -> str | None:
        """One update of the active visit, logged; returns why the visit stops, or None."""
        cfg, state, visit = self.cfg, self.state, self.state.active
        assert visit is not None   # (called while a visit is active)
        wf = Workflow.from_index(visit.workflow)
        first = state.episodes_used - visit.episodes   # the visit's episodes follow on
        row, ustats, stop = visit_update(cfg, self.steps, learner, visit, first,
                                         cfg.total_episodes - first,
                                         behaviour=self._take_behaviour())
        n = visit.last_update_episodes
        state.episodes_used += n
        state.episode_mark = state.episodes_used
        state.updates += 1
        state.trained[wf.index] = state.trained.get(wf.index, 0) + n
        self._log_update(row, ustats)
        left = cfg.total_episodes - state.episodes_used
        assert visit.last_update is not None   # (set by visit_update)
        self.progress(f"  {wf.arrow()} | update {visit.updates:3d} | "
                      f"{self._rate():6.1f} eps/s | reward {row['Env_Reward']:8.2f}"
                      f" ± {row['Env_Reward_SE']:5.2f} | compliance "
                      f"{visit.last_update.compliance:.3f} | budget left {left} | {self._eta()}")
        return stop

    def _log_update(self, row: dict, ustats: dict) -> None:
        """One update's training_log.csv row (and, with --tensorboard, its curves)."""
        self.train_log.append(row)
        self.state.training_log_rows += 1
        if self.curves is not None:
            self.curves.update(row, ustats, self.state.episodes_used * EP_LEN,
                               self._rate() * EP_LEN, {"search/visits": len(self.state.visits)})

    # ---------------------------------------------------------------- step 4: record the visit
    def _record_visit(self, collector, learner, stop: str) -> None:
        """The active visit ended: save its policy, measure it, tell the optimizer, log it."""
        cfg, state, visit = self.cfg, self.state, self.state.active
        assert visit is not None   # (called while a visit is active)
        wf = Workflow.from_index(visit.workflow)
        save_checkpoint(checkpoint_path(self.run, wf.index), policy_payload(
            learner, cfg.ppo, str(wf), wf.index, episodes=state.trained.get(wf.index, 0),
            config=cfg.to_dict()))
        complete, played = measure_visit(cfg, self.steps, collector, learner, visit, stop,
                                         self._eval_backends)
        state.active = None
        self._tell_visit(visit, complete, played)

    def _tell_visit(self, visit, complete: bool, played: int) -> None:
        """An ended, measured visit (its training already counted in the state) joins the
        record: the optimizer is told it (if complete), gp_sampling_log.csv gets its row."""
        cfg, state = self.cfg, self.state
        wf = Workflow.from_index(visit.workflow)
        lineage = visit.lineage_start + visit.episodes
        state.lineage[wf.index] = lineage
        state.eval_episodes += played
        result, last = visit.result, visit.last_update
        if complete:
            self.opt.tell(wf, result.reward, result.se, result.compliance, lineage)
            state.optimizer = self.opt.state_dict()
        state.visits.append(visit)
        pick, gp_updated, stop = visit.pick, visit.gp_updated, visit.stop
        self.gp_log.append({
            "Iteration": visit.iteration, "Workflow": str(wf), "Workflow_ID": wf.index,
            "UCB_Score": round(pick.score, 4), "Posterior_Mean": round(pick.mean, 4),
            "Posterior_SD": round(pick.sd, 4), "Beta": round(pick.beta, 4),
            "Reward": result.reward, "Reward_SE": result.se,
            "Final_Compliance": result.compliance, "Episodes_Trained": visit.episodes,
            "GP_Updated": gp_updated, "Stop_Reason": stop,
            "Inherited_From": "" if visit.inherited_from is None else
            "base" if visit.inherited_from == BASE_POLICY else
            str(Workflow.from_index(visit.inherited_from)),
            "Total_Episodes_Sampled": state.episodes_used, "Lineage_Episodes": lineage,
            "P_Feasible": "" if pick.p_feasible is None or math.isnan(pick.p_feasible)
            else round(pick.p_feasible, 4)})
        state.gp_log_rows += 1
        why = ("" if gp_updated else
               f"  (below θ = {cfg.compliance_threshold}: the feasibility model learns from it, "
               "the reward model does not)" if complete else
               f"  (cut short by the budget after {visit.episodes} episodes: not given to the "
               "models)")
        if complete and cfg.visit_eval == "greedy":
            per = visit.evaluation["per_red"]
            measured = " (greedy, " + ", ".join(
                f"{red} {e['reward']:.2f}" for red, e in per.items()) + \
                f"; {visit.evaluation['n']} fresh episodes)"
        else:
            measured = (f" (training window {last.compliance:.3f}, measured on "
                        f"{visit.evaluation['n']} fresh episodes)"
                        if complete and cfg.compliance_eval_episodes > 0 else "")
        tag = f"  [visit {visit.iteration}]" if cfg.concurrent_visits > 1 else " "
        self.progress(f"{tag} → {stop}: reward {result.reward:.2f} ± {result.se:.2f}, "
                      f"compliance {result.compliance:.3f}{measured} after {visit.episodes} "
                      "episodes" + why)

    def _close(self) -> dict:
        """summary.json, posterior.csv, the plots and the final commit (finished); returns the
        summary."""
        cfg, state = self.cfg, self.state
        report = self.opt.report()
        summary = search_summary(cfg, state, self.opt, report)
        write_json(self.run / "summary.json", summary)
        write_csv_atomic(self.run / "posterior.csv", POSTERIOR_COLUMNS,
                         posterior_rows(self.opt, report))
        from wfrl.search.plots import plot_run
        plot_run(self.run, self.opt, report)
        state.finished = True  # last: a kill before this commit leaves a resumable run
        self._commit(None)
        self._writer.flush()
        self.progress(format_table(summary, cfg.compliance_threshold))
        self.progress(f"records in {self.run}")
        return summary


def search(cfg: SearchConfig, resume: bool = False, progress=None, note: str | None = None) -> dict:
    """Run (or, resume=True, continue) the search in cfg.out, holding the run directory's lock
    from before the first file is read until the end (one process per run directory). note:
    a line said once the run has started (where its visits start from: wfrl.search.bases)."""
    cfg = cfg.validate()
    if cfg.base == "auto":   # (resolved by wfrl.api.train_run; a config built by hand pretrains)
        cfg = dataclasses.replace(cfg, base="pretrain")
    if cfg.tensorboard:
        TensorBoardLog.check()
    check_workers_fit(cfg.resolved_collector(), cfg.backend, cfg.n_workers, cfg.ray_address)
    if resume and not Path(cfg.out).is_dir():
        raise UserError(f"cannot resume: {cfg.out} is not a directory")
    with locked_dir(cfg.out, "search"):
        run = WorkflowSearch(cfg, resume=resume, progress=progress)
        if note:
            run.progress(note)
        return run.run_search()
