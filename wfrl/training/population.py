"""A defender trained against reds that learn: `wfrl population` (population(PopulationConfig)), a
double oracle (PSRO) over CAGE2's defender and attacker.

The population starts with --reds (CAGE2's two and three variants: family-train). The defender
D0 is --init-from (an order-conditioned policy). Round k = 1..R:

1. attack: --best-responses K red best responses to D(k-1) (wfrl.training.attack, under
   --workflow, each its own seed), in rounds/NNN/attack/ (and attack-2/ .. attack-K/), side by
   side in worker processes or Ray tasks when K > 1; every best.pt joins the population. The
   strongest one's summary is D(k-1)'s exploitability: the defender's return against B_line
   minus its return against that red, on held-out episodes; the red was trained fresh against
   D(k-1) and is in no population D(k-1) trained against.
2. payoff: blue's mean return of every defender so far (D0..D(k-1), greedy, --workflow) against
   every red of the population, on the same reserved episodes (payoff.json).
3. mixture: the meta-solver's weights over the population (payoff.json, population.json):
   `nash`, red's mixture of the zero-sum game's equilibrium (the mixture that holds the best
   defender so far lowest; a linear programme), or `uniform`.
4. defender: D(k-1) trained on from its learner state against population:rounds/NNN/
   population.json (each episode's red drawn from the mixture by its seed) for
   --defender-episodes, one random workflow per update with the compliance reward (so Dk follows
   any workflow), then scored on held-out episodes against B_line and Meander (round.json).

After the last round K more best responses (final/attack/, ...) measure D(R). Records in --out:
experiment_config.json, rounds/NNN/{attack/, payoff.json, population.json, defender/
(training_log.csv, checkpoint.pt while it trains), round.json}, defenders/dNNN.pt (each
defender, loadable as any checkpoint with --workflow W), curve.csv (per defender: its
exploitability and held-out returns) and summary.json. Every stage is kept when done, and the
defender's training commits each update, so `--resume` after a kill continues where it stopped
and ends with the records of an uninterrupted run.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from wfrl._version import __version__
from wfrl.config.duel import ATTACK_PPO, AttackConfig, PopulationConfig
from wfrl.config.names import LEARNED_PREFIX, POPULATION_PREFIX, expand_reds
from wfrl.config.run import PPOConfig
from wfrl.errors import UserError
from wfrl.rng import EVAL_EPISODE_BASE, SELECT_EPISODE_BASE
from wfrl.runlog import (
    CsvLog,
    RunDir,
    TensorBoardLog,
    load_checkpoint,
    locked_dir,
    save_checkpoint,
    write_json,
)

if TYPE_CHECKING:
    from wfrl.collect.jobs import LocalVisitPool

SEED_STRIDE = 1000      # best response j (0-based) to defender d: seed + d + 1 + SEED_STRIDE * j
CURVE_COLUMNS = ["Defender", "Exploitability", "Vs_Strongest_Red", "Vs_Strongest_Red_SE",
                 "Vs_B_line", "Vs_B_line_SE", "Vs_Meander", "Vs_Meander_SE", "Compliance",
                 "Population", "Red_Play"]
MODE = "population"


# ------------------------------------------------------------------------------- meta-solvers
def nash_mixture(payoff) -> tuple[np.ndarray, np.ndarray, float]:
    """The equilibrium of the zero-sum game whose row player (blue) gets payoff[i, j] and whose
    column player (red) pays it: (blue's mixture, red's mixture, the game's value). Red's
    mixture minimises the best row's expected payoff (a linear programme, solved exactly by
    HiGHS); blue's maximises the worst column's."""
    from scipy.optimize import linprog
    a = np.asarray(payoff, np.float64)
    if a.ndim != 2 or 0 in a.shape or not np.all(np.isfinite(a)):
        raise ValueError("a payoff matrix: finite, at least one row and one column")
    rows, cols = a.shape

    def solve(m):   # min v s.t. m @ x <= v, sum x = 1, x >= 0 (x over m's columns)
        n = m.shape[1]
        c = np.r_[np.zeros(n), 1.0]
        res = linprog(c, A_ub=np.c_[m, -np.ones(m.shape[0])], b_ub=np.zeros(m.shape[0]),
                      A_eq=np.r_[np.ones(n), 0.0][None], b_eq=[1.0],
                      bounds=[(0, None)] * n + [(None, None)], method="highs")
        if not res.success:   # (cannot happen for a finite matrix: the LP is always feasible)
            raise RuntimeError(f"the meta-game's linear programme failed: {res.message}")
        x = np.clip(res.x[:n], 0.0, None)
        return x / x.sum(), float(res.x[n])

    red, value = solve(a)            # red: minimise the best row
    blue, _ = solve(-a.T)            # blue: maximise the worst column
    return blue, red, value


def meta_mixture(solver: str, payoff) -> np.ndarray:
    """Red's weights over the population's columns by the meta-solver (`nash` or `uniform`)."""
    a = np.asarray(payoff, np.float64)
    if solver == "uniform":
        return np.full(a.shape[1], 1.0 / a.shape[1])
    if solver == "nash":
        return nash_mixture(a)[1]
    raise ValueError(solver)


# ------------------------------------------------------------------------------- the run
def population(cfg: PopulationConfig, progress=None, resume: bool = False) -> dict:
    """Run population training as configured (resume: continue the run in cfg.out); returns the
    summary also written to summary.json."""
    progress = progress or (lambda line: print(line, file=sys.stderr, flush=True))
    cfg = dataclasses.replace(cfg.validate(), collector=cfg.resolved_collector())
    _check_start(cfg)                # bad input before any file is written
    if cfg.tensorboard:
        TensorBoardLog.check()
    with locked_dir(cfg.out, "population run"):
        if resume:
            _check_resumable(cfg.out)
        return _Loop(cfg, progress, resume).run()


def stored_config(run_dir) -> PopulationConfig:
    """The settings a population run in run_dir was started with (one line if it is none)."""
    path = Path(run_dir) / "experiment_config.json"
    try:
        d = json.loads(path.read_text())
    except (OSError, ValueError):
        raise UserError(f"cannot resume: {path} is missing or unreadable") from None
    if not isinstance(d, dict) or d.get("mode") != MODE:
        raise UserError(f"cannot resume: {run_dir} is not a population run")
    d = {k: v for k, v in d.items() if k not in ("mode", "wfrl_version")}
    d["out"] = str(run_dir)
    cfg = PopulationConfig.from_dict({k: v for k, v in d.items() if k != "ppo"}, str(path))
    return dataclasses.replace(cfg, ppo=PPOConfig.from_dict(d.get("ppo") or {}, str(path)))


def _check_resumable(out) -> None:
    if (Path(out) / "summary.json").exists():
        raise UserError(f"cannot resume: the run in {out} is finished (summary.json)")


def _check_start(cfg: PopulationConfig) -> None:
    """The starting defender and the learned reds of --reds load and fit the run (one line
    each)."""
    from wfrl.envs.base import is_leaderboard
    from wfrl.envs.duel import red_weights
    from wfrl.evaluation.checkpoint import net_from_checkpoint, trained_on_other_code, weights_from_checkpoint
    ck = load_checkpoint(cfg.init_from)
    weights_from_checkpoint(ck)
    if ck.get("side") == "red":
        raise UserError(f"--init-from {cfg.init_from} is a red's checkpoint; a defender's is "
                        "wanted")
    theirs, ours = net_from_checkpoint(ck), cfg.ppo.net()
    if theirs != ours:
        raise UserError(f"--init-from {cfg.init_from}: its policy is {theirs.describe()}, this "
                        f"run trains {ours.describe()}")
    if ck.get("workflow") is not None and not (ck.get("any_workflow") or ck.get("base")):
        raise UserError(f"--init-from {cfg.init_from} was trained on one workflow "
                        f"({ck['workflow']}); population training starts from an "
                        "order-conditioned policy (pretrained:any_workflow, a search's base)")
    other = trained_on_other_code(ck, cfg.backend)
    if other is not None:
        raise UserError(f"--init-from {cfg.init_from} was trained on {other}, the other CybORG "
                        f"code than this run's {cfg.backend}")
    for red in expand_reds(cfg.reds):
        if red.startswith(LEARNED_PREFIX):
            red_weights(red[len(LEARNED_PREFIX):], is_leaderboard(cfg.backend))


def _load_json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        raise UserError(f"{path} is damaged: remove its round's folder and --resume") from None


class _Loop:
    def __init__(self, cfg: PopulationConfig, progress, resume: bool):
        self.cfg, self.progress = cfg, progress
        self.run_dir = RunDir(cfg.out, cfg.force or resume)
        self.path = self.run_dir.path
        self.started = time.perf_counter()
        config = self.path / "experiment_config.json"
        if not (resume and config.exists()):
            write_json(config, {"mode": MODE, "wfrl_version": __version__, **cfg.to_dict()})
        (self.path / "defenders").mkdir(exist_ok=True)
        (self.path / "rounds").mkdir(exist_ok=True)
        self.tb: TensorBoardLog | None = None
        # the side-by-side best responses' worker processes, kept for the whole run
        self.pool: LocalVisitPool | None = None

    # -- where things are
    def round_dir(self, k: int) -> Path:
        return self.path / "rounds" / f"{k:03d}"

    def defender_path(self, k: int) -> Path:
        return self.path / "defenders" / f"d{k:03d}.pt"

    def attack_dir(self, d: int, j: int = 0) -> Path:
        """Where best response j (0-based) to defender d runs: in round d + 1's folder, or in
        final/ for the last defender."""
        base = self.round_dir(d + 1) if d < self.cfg.rounds else self.path / "final"
        return base / ("attack" if j == 0 else f"attack-{j + 1}")

    def members(self, k: int) -> list[str]:
        """Round k's population: --reds, then every best response of rounds 1..k."""
        return list(expand_reds(self.cfg.reds)) + [
            LEARNED_PREFIX + str(self.attack_dir(d, j) / "best.pt")
            for d in range(k) for j in range(self.cfg.best_responses)]

    def run(self) -> dict:
        cfg = self.cfg
        if cfg.tensorboard:
            done = sum(1 for k in range(1, cfg.rounds + 1)
                       if (self.round_dir(k) / "round.json").exists())
            self.tb = TensorBoardLog(cfg.tensorboard, purge_step=done)
        try:
            self._defender_zero()
            for k in range(1, cfg.rounds + 1):
                if not (self.round_dir(k) / "round.json").exists():
                    self._round(k)
                self._write_curve()
            final = self._attack(cfg.rounds)
            if self.tb is not None:
                self._tb_exploitability(cfg.rounds, final)
            self._write_curve()
            return self._summary(final)
        finally:
            if self.pool is not None:
                self.pool.close()
            if self.tb is not None:
                self.tb.close()

    def _tb_exploitability(self, d: int, attack: dict) -> None:
        if self.tb is None:
            return
        self.tb.scalars({"population/exploitability": attack["exploitability"],
                         "population/vs_strongest_red": attack["vs_red"]["mean"]}, d)

    def _defender_zero(self) -> None:
        """D0: the starting policy, as a defender checkpoint of the run."""
        if self.defender_path(0).exists():
            return
        ck = load_checkpoint(self.cfg.init_from)
        save_checkpoint(self.defender_path(0), self._defender_payload(
            {"model": ck["model"], "version": int(ck.get("version", 0))}, 0, 0))

    def _defender_payload(self, state: dict, k: int, episodes: int) -> dict:
        cfg = self.cfg
        return {**state, "hidden": cfg.ppo.hidden, "net": cfg.ppo.net().to_dict(),
                "any_workflow": True, "episodes": episodes, "round": k,
                "config": {"alignment_lambda": cfg.alignment_lambda, "count_foothold": False,
                           "red_agent": "population", "compliance_threshold": 0.95,
                           "seed": cfg.seed, "backend": cfg.backend}}

    # -- one round
    def _round(self, k: int) -> None:
        cfg, rdir = self.cfg, self.round_dir(k)
        rdir.mkdir(exist_ok=True)
        t0 = time.perf_counter()
        attack = self._attack(k - 1)
        t1 = time.perf_counter()
        members = self.members(k)
        payoff = self._payoff(k, members)
        t2 = time.perf_counter()
        state = self._train_defender(k, rdir)
        t3 = time.perf_counter()
        held = self._held_out(k)
        record = {"round": k, "population": len(members), "mixture": payoff["mixture"],
                  "exploitability_before": attack["exploitability"],
                  **({"exploitability_each": attack["exploitability_each"]}
                     if cfg.best_responses > 1 else {}),
                  "defender": f"defenders/d{k:03d}.pt", "held_out": held,
                  "episodes": state["episodes"],
                  "wall_time_s": {"attack": round(t1 - t0, 3), "payoff": round(t2 - t1, 3),
                                  "defender": round(t3 - t2, 3),
                                  "held_out": round(time.perf_counter() - t3, 3)}}
        write_json(rdir / "round.json", record)
        if self.tb is not None:
            self._tb_exploitability(k - 1, attack)
            self.tb.scalars({"population/b_line": held["B_lineAgent"]["mean"],
                             "population/meander": held["RedMeanderAgent"]["mean"],
                             "population/compliance": held["compliance"],
                             "population/nash_value": payoff["value"]}, k)
        self.progress(f"round {k}/{cfg.rounds}: D{k} B_line {held['B_lineAgent']['mean']:.2f}, "
                      f"Meander {held['RedMeanderAgent']['mean']:.2f}, compliance "
                      f"{held['compliance']:.3f} ({time.perf_counter() - t0:.0f} s)")

    def _attack(self, d: int) -> dict:
        """The --best-responses fresh reds against defender d (each resumed if it was
        interrupted, K > 1 side by side); returns the strongest one's summary, with every one's
        exploitability under "exploitability_each" when K > 1."""
        cfg = self.cfg
        k = cfg.best_responses
        outs = [self.attack_dir(d, j) for j in range(k)]
        todo = [j for j in range(k) if not (outs[j] / "summary.json").exists()]
        if todo:
            self.progress(f"best response{'s' if k > 1 else ''} to D{d}: {cfg.attack_episodes} "
                          f"episodes in {outs[0]}" + (f" (+{k - 1} more)" if k > 1 else ""))
            threads = cfg.threads if len(todo) == 1 or cfg.ray_address else \
                max(1, cfg.threads // len(todo))
            jobs = [(self._attack_config(d, j, threads),
                     "  [attack]" if k == 1 else f"  [attack {j + 1}]") for j in todo]
            if len(jobs) == 1:
                _attack_job(*jobs[0], progress=self.progress)
            elif cfg.ray_address:   # each folder shipped to its task and back
                from wfrl.collect.jobs import run_folders_on_ray
                run_folders_on_ray(_attack_run, [acfg for acfg, _ in jobs], cfg.ray_address,
                                   threads)
            else:   # the same K worker processes round after round (each starts once)
                from wfrl.collect.jobs import LocalVisitPool
                if self.pool is None:
                    self.pool = LocalVisitPool(k, fn=_attack_job, what="best response")
                for j, job in zip(todo, jobs):
                    self.pool.submit(j + 1, job)      # best response j + 1 (attack-{j + 1}/)
                for j in todo:
                    self.pool.result(j + 1)
        summaries = [_load_json(out / "summary.json") for out in outs]
        each = [s["exploitability"] for s in summaries]
        strongest = summaries[int(np.argmax(each))]
        if todo:
            self.progress(f"D{d}: exploitability {strongest['exploitability']:.2f} (B_line "
                          f"{strongest['vs_b_line']['mean']:.2f}, strongest fresh red "
                          f"{strongest['vs_red']['mean']:.2f})"
                          + (f"; each red: {', '.join(f'{e:.2f}' for e in each)}" if k > 1
                             else ""))
        return {**strongest, "exploitability_each": each} if k > 1 else strongest

    def _attack_config(self, d: int, j: int, threads: int) -> AttackConfig:
        cfg = self.cfg
        return AttackConfig(checkpoint=str(self.defender_path(d)), workflow=cfg.workflow,
                            backend=cfg.backend, total_episodes=cfg.attack_episodes,
                            eval_every=cfg.attack_eval_every, eval_episodes=cfg.eval_episodes,
                            seed=cfg.seed + d + 1 + SEED_STRIDE * j, out=str(self.attack_dir(d, j)),
                            force=True, threads=threads, ppo=PPOConfig(**ATTACK_PPO))

    def _payoff(self, k: int, members: list) -> dict:
        """Round k's payoff matrix (defenders D0..D(k-1) × members) and mixture."""
        cfg, rdir = self.cfg, self.round_dir(k)
        path = rdir / "payoff.json"
        if path.exists() and (rdir / "population.json").exists():
            return _load_json(path)
        from wfrl.envs.reds import write_population
        matrix = np.array([[self._score(d, red)["mean"] for red in members] for d in range(k)])
        meta = meta_mixture(cfg.meta_solver, matrix)
        value = float(nash_mixture(matrix)[2])
        scripted = len(expand_reds(cfg.reds))
        floor = np.r_[np.full(scripted, 1.0 / scripted), np.zeros(len(members) - scripted)]
        mixture = cfg.scripted_share * floor + (1.0 - cfg.scripted_share) * meta
        write_population(rdir / "population.json", members, mixture)
        per = cfg.best_responses
        cols = list(members[:scripted]) + [
            f"BR{r}" if per == 1 else f"BR{r}.{j + 1}" for r in range(1, k + 1) for j in range(per)]
        out = {"rows": [f"D{d}" for d in range(k)], "columns": cols,
               "payoff": [[round(float(x), 4) for x in row] for row in matrix],
               "meta_mixture": [round(float(w), 6) for w in meta],
               "mixture": [round(float(w), 6) for w in mixture], "solver": cfg.meta_solver,
               "scripted_share": cfg.scripted_share,
               "value": round(value, 4), "episodes": cfg.eval_episodes,
               "workflow": cfg.workflow}
        write_json(path, out)
        shown = ", ".join(f"{c} {w:.2f}" for c, w in zip(cols, meta) if w > 0.005)
        self.progress(f"round {k}: payoff {k}×{len(members)}, {cfg.meta_solver} mixture: {shown} "
                      f"(with {cfg.scripted_share:.2f} on the scripted reds in training)")
        return out

    def _score(self, d: int, red: str) -> dict:
        """Defender d (greedy, --workflow) against one red on the payoff matrix's episodes."""
        from wfrl.envs import make_backend
        from wfrl.evaluation.checkpoint import policy_of_checkpoint
        from wfrl.evaluation.returns import play, summarise
        from wfrl.workflow import Workflow
        cfg = self.cfg
        weights, net, wf, lam, foothold = policy_of_checkpoint(str(self.defender_path(d)),
                                                               cfg.workflow)
        backend = make_backend(cfg.backend, red, seed=cfg.seed)
        eps = range(SELECT_EPISODE_BASE, SELECT_EPISODE_BASE + cfg.eval_episodes)
        try:
            return summarise(play(backend, weights, net, Workflow.parse(wf), lam, foothold, eps,
                                  cfg.seed, greedy=True))
        finally:
            backend.close()

    def _held_out(self, k: int) -> dict:
        """Dk on held-out episodes against B_line and Meander (greedy, --workflow)."""
        from wfrl.envs import make_backend
        from wfrl.evaluation.checkpoint import policy_of_checkpoint
        from wfrl.evaluation.returns import play, summarise
        from wfrl.workflow import Workflow
        cfg = self.cfg
        weights, net, wf, lam, foothold = policy_of_checkpoint(str(self.defender_path(k)),
                                                               cfg.workflow)
        eps = range(EVAL_EPISODE_BASE, EVAL_EPISODE_BASE + cfg.eval_episodes)
        out: dict = {}
        comp: list[float] = []
        for red in ("B_lineAgent", "RedMeanderAgent"):
            s = summarise(play(make_backend(cfg.backend, red, seed=cfg.seed), weights, net,
                               Workflow.parse(wf), lam, foothold, eps, cfg.seed, greedy=True))
            out[red] = {"mean": round(s["mean"], 4), "se": round(s["se"], 4)}
            comp.append(s["compliance"])
        out["compliance"] = round(float(np.mean(comp)), 4)
        return out

    # -- the defender's training
    def _train_defender(self, k: int, rdir: Path) -> dict:
        """D(k-1) trained on against round k's population; Dk saved. Commits every update."""
        import torch

        from wfrl.collect.base import make_collector
        from wfrl.ppo.learner import PPOLearner
        from wfrl.runlog import read_csv, truncate_csv
        from wfrl.training.steps import (
            LOG_COLUMNS,
            LearnerSteps,
            behaviour_version,
            log_row,
            pretrain_workflow,
        )
        cfg = self.cfg
        if self.defender_path(k).exists():
            return {"episodes": int(load_checkpoint(self.defender_path(k))["episodes"])}
        ddir = rdir / "defender"
        ddir.mkdir(exist_ok=True)
        total, per = cfg.defender_episodes, cfg.episodes_per_update
        learner = PPOLearner(cfg.ppo, seed=cfg.seed + 7919 * k)
        commit = ddir / "checkpoint.pt"
        prev = load_checkpoint(self.defender_path(k - 1))
        saved = {}
        if commit.exists():
            ck = load_checkpoint(commit)
            learner.load_state(ck)
            saved = ck["resume"]
            self.progress(f"round {k}: resuming the defender after {saved['episodes']} of "
                          f"{total} episodes")
        else:
            learner.load_state({k2: v for k2, v in prev.items() if k2 in ("model", "optimizer")})
            learner.version = 0
        done, update = saved.get("episodes", 0), saved.get("update", 0)
        if saved:
            truncate_csv(ddir / "training_log.csv", LOG_COLUMNS, update)
        log = CsvLog(ddir / "training_log.csv", LOG_COLUMNS, fresh=not saved)
        behaviour = None
        if saved.get("behaviour") is not None:
            b = saved["behaviour"]
            behaviour = (b["weights"].numpy(), int(b["version"]))
        pop = POPULATION_PREFIX + str(rdir / "population.json")
        collector = make_collector(cfg.collector, cfg.backend, pop, cfg.ppo.net(), cfg.seed,
                                   cfg.alignment_lambda, False, cfg.n_workers, per,
                                   ray_address=cfg.ray_address)
        steps = LearnerSteps(collector, cfg.ppo, overlap=True)
        first = (k - 1) * total             # the round's training episodes: its own range
        upd0 = (k - 1) * -(-total // per)   # and its own workflow draws
        self.progress(f"round {k}: training D{k - 1} on against the population, {total} episodes")
        with steps.running():
            while done < total:
                learner.set_progress(done / total)
                wf = pretrain_workflow(cfg.seed, upd0 + update)
                n = min(per, total - done)
                after = done + n

                def then(_eps, after=after, update=update):
                    if after >= total:
                        return None
                    return (pretrain_workflow(cfg.seed, upd0 + update + 1), first + after,
                            min(per, total - after))
                cond = np.tile(wf.onehot(), (per, 1))
                eps, ustats, tc, tu = steps.step(learner, wf, cond, first + done, n, then=then,
                                                 behaviour=behaviour)
                behaviour = None
                done, update = after, update + 1
                log.append(log_row(wf, update, done, first + done, eps, ustats, tc, tu,
                                   behaviour_version(eps), phase="population",
                                   first_fix=steps.first_fix))
                ahead = steps.behaviour
                ahead_state = None if ahead is None else {
                    "weights": torch.from_numpy(np.array(ahead[0], copy=True)),
                    "version": int(ahead[1])}
                save_checkpoint(commit, {**self._defender_payload(learner.state(), k, done),
                                         "resume": {"update": update, "episodes": done,
                                                    "behaviour": ahead_state}})
        rows = read_csv(ddir / "training_log.csv")
        save_checkpoint(self.defender_path(k), self._defender_payload(
            learner.state(), k, int(prev.get("episodes", 0)) + total))
        commit.unlink()
        last = rows[-1] if rows else {}
        self.progress(f"round {k}: D{k} trained ({total} episodes; last batch "
                      f"{last.get('Env_Reward', '?')}, compliance {last.get('Compliance', '?')})")
        return {"episodes": total}

    # -- records
    def _curve_rows(self) -> list[dict]:
        rows = []
        for d in range(self.cfg.rounds + 1):
            paths = [self.attack_dir(d, j) / "summary.json"
                     for j in range(self.cfg.best_responses)]
            if not all(p.exists() for p in paths):
                break
            a = max((_load_json(p) for p in paths), key=lambda s: s["exploitability"])
            rj = self.round_dir(d) / "round.json"
            held = _load_json(rj)["held_out"] if d > 0 and rj.exists() else None
            pop = len(expand_reds(self.cfg.reds)) + d * self.cfg.best_responses
            rows.append({"Defender": d, "Exploitability": a["exploitability"],
                         "Vs_Strongest_Red": a["vs_red"]["mean"],
                         "Vs_Strongest_Red_SE": a["vs_red"]["se"],
                         "Vs_B_line": a["vs_b_line"]["mean"], "Vs_B_line_SE": a["vs_b_line"]["se"],
                         "Vs_Meander": a["vs_meander"]["mean"],
                         "Vs_Meander_SE": a["vs_meander"]["se"],
                         "Compliance": "" if held is None else held["compliance"],
                         "Population": pop if d > 0 else 0,
                         "Red_Play": "greedy" if a["vs_red"] == a["vs_red_greedy"] else "sampling"})
        return rows

    def _write_curve(self) -> None:
        path = self.path / "curve.csv"
        tmp = path.with_name("curve.csv.tmp")
        tmp.unlink(missing_ok=True)
        log = CsvLog(tmp, CURVE_COLUMNS, fresh=True)
        for row in self._curve_rows():
            log.append(row)
        tmp.replace(path)

    def _summary(self, final: dict) -> dict:
        cfg = self.cfg
        curve = self._curve_rows()
        last = _load_json(self.round_dir(cfg.rounds) / "payoff.json")
        walls = [_load_json(self.round_dir(k) / "round.json")["wall_time_s"]
                 for k in range(1, cfg.rounds + 1)]
        summary = {"rounds": cfg.rounds, "meta_solver": cfg.meta_solver, "backend": cfg.backend,
                   "defender": f"defenders/d{cfg.rounds:03d}.pt",
                   "exploitability": [r["Exploitability"] for r in curve],
                   "last_payoff": last, "final_attack": {k: final[k] for k in (
                       "vs_red", "vs_b_line", "vs_meander", "exploitability")},
                   "wall_time_s": {"rounds": walls,
                                   "this_process": round(time.perf_counter() - self.started, 3)}}
        write_json(self.path / "summary.json", summary)
        self.progress(f"done: exploitability by round {summary['exploitability']}; defender "
                      f"{self.defender_path(cfg.rounds)}")
        return summary


# ------------------------------------------------------------------------- best responses
def _attack_run(acfg: AttackConfig, progress) -> dict:
    """One best response (wfrl attack) in acfg.out, continued if a run is there."""
    from wfrl.training.attack import attack
    return attack(acfg, progress=progress, resume=Path(acfg.out).exists())


def _attack_job(acfg: AttackConfig, tag: str, progress=None) -> dict:
    """_attack_run here, or in a worker process (whose progress lines go to stderr), its
    progress lines tagged."""
    say = progress or functools.partial(_tagged_stderr, "")
    return _attack_run(acfg, lambda line: say(f"{tag} {line}"))


def _tagged_stderr(tag: str, line: str) -> None:
    print(tag + line, file=sys.stderr, flush=True)
