"""The measurements behind docs/scale.md, side by side in one run on one machine:

- the default search (pretrained base, greedy visit measurement) on a fixed budget with
  --concurrent-visits 1 and 2 (sequential collectors, so both spend the same CPU per visit; and
  K = 1 with the default collector, the serial search as users run it): wall time, CPU seconds
  of the whole process tree, visits; ROUNDS rounds, interleaved;
- the 5-seed ground truth (`wfrl exhaustive --protocol recipe --repeats 5`) serial and with
  --concurrent 2;
- the constants of the model: collection and update rates per core (from the K = 1 search's
  training log: Collection_Time and Update_Time of each update, one core), Ray's round trip for
  an empty task and the time to put the learner's weights in the object store (a private
  loopback instance), and the spawn of a visit's worker.

    python experiments/scale_measure.py OUT_DIR [--rounds 2] [--budget 15000] [--skip-truth]
    python experiments/scale_measure.py OUT_DIR --driver-only    # the driver's ask, afterwards
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

PY = sys.executable


def timed(args: list[str], log: Path) -> dict:
    """Run a command; its wall seconds and the CPU seconds of it and everything it waited for."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    with open(log, "w") as f:
        rc = subprocess.run(args, stdout=f, stderr=subprocess.STDOUT).returncode
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if rc != 0:
        raise SystemExit(f"{' '.join(args)} failed ({rc}); see {log}")
    return {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2)}


def search(out: Path, name: str, k: int, collector: str, budget: int, seed: int) -> dict:
    run = out / name
    r = timed([PY, "-m", "wfrl", "train", "--seed", str(seed), "--total-episodes", str(budget),
               "--collector", collector, "--concurrent-visits", str(k), "--out", str(run),
               "--force"], out / f"{name}.log")
    summary = json.loads((run / "summary.json").read_text())
    with open(run / "gp_sampling_log.csv", newline="") as f:
        visits = len(list(csv.DictReader(f)))
    r.update({"k": k, "collector": collector, "visits": visits,
              "episodes": summary["episodes_used"], "eval_episodes": summary.get("eval_episodes"),
              "cpu_s_per_visit": round(r["cpu_s"] / visits, 2),
              "wall_s_per_visit": round(r["wall_s"] / visits, 2)})
    return r


def rates(run: Path) -> dict:
    """Collection and update rates of one core, from a sequential run's training log."""
    with open(run / "training_log.csv", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["Phase"] == "visit"]
    eps = sum(int(r["Episodes"]) - int(p["Episodes"]) if r["Workflow_ID"] == p["Workflow_ID"]
              and int(r["Update"]) > 1 else int(r["Episodes"])
              for p, r in zip([rows[0]] + rows[:-1], rows))
    t_c = sum(float(r["Collection_Time"]) for r in rows)
    t_u = sum(float(r["Update_Time"]) for r in rows)
    return {"updates": len(rows), "episodes": eps,
            "collect_eps_per_s_core": round(eps / t_c, 1),
            "update_eps_per_s_core": round(eps / t_u, 1)}


def ray_constants() -> dict:
    """Round trip of an empty Ray task and a put of the default network's weights, on a private
    loopback instance (wfrl.collect.ray.local.LocalRay)."""
    import numpy as np
    import ray

    from wfrl.collect.ray.local import LocalRay
    from wfrl.config.run import PPOConfig
    from wfrl.ppo.learner import PPOLearner
    weights = PPOLearner(PPOConfig(memory=True, mask=True), seed=0).flat_weights()
    local = LocalRay(num_cpus=2)
    try:
        nop = ray.remote(num_cpus=1)(lambda x: x)
        ray.get(nop.remote(0))                      # the worker process is up
        t0 = time.perf_counter()
        for _ in range(50):
            ray.get(nop.remote(0))
        task = (time.perf_counter() - t0) / 50
        t0 = time.perf_counter()
        for _ in range(50):
            ray.put(weights)
        put = (time.perf_counter() - t0) / 50
        t0 = time.perf_counter()
        for _ in range(20):
            ray.get(nop.remote(np.ones(1)))
        cold = time.perf_counter() - t0
    finally:
        local.shutdown()
    return {"task_round_trip_s": round(task, 5), "weights_put_s": round(put, 6),
            "weights_bytes": int(weights.nbytes), "tasks_20_s": round(cold, 3)}


def spawn_constant(out: Path) -> dict:
    """Seconds from submitting a job to a fresh spawned worker to its first line of work: the
    interpreter, numpy, torch and wfrl imported (a visit's worker pays it once per pool)."""
    code = ("import time,sys; t=time.perf_counter(); import torch, wfrl.search.visits, "
            "wfrl.collect.base; print(time.perf_counter()-t)")
    t0 = time.perf_counter()
    res = subprocess.run([PY, "-c", code], capture_output=True, text=True, check=True)
    return {"spawn_import_s": round(time.perf_counter() - t0, 3),
            "imports_s": round(float(res.stdout.strip()), 3)}


def driver_constant(run: Path) -> dict:
    """Seconds of the driver's ask (both GPs fitted, the pending visits believed) with 10, 20
    and 30 visits told and 0, 1 or 7 pending, from a K = 1 search's visits (best of 3)."""
    from wfrl.search.optimizer import WorkflowOptimizer
    with open(run / "gp_sampling_log.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    out = {}
    for n in (10, 20, 30):
        for k in (0, 1, 7):
            times = []
            for _ in range(3):
                opt = WorkflowOptimizer(seed=11)
                for r in rows[:n]:
                    opt.tell(int(r["Workflow_ID"]), float(r["Reward"]), float(r["Reward_SE"]),
                             float(r["Final_Compliance"]))
                pending = [int(r["Workflow_ID"]) for r in (rows[n:] + rows)[:k]]
                t0 = time.perf_counter()
                opt.ask(pending=pending)
                times.append(time.perf_counter() - t0)
            out[f"ask_told{n}_pending{k}_s"] = round(min(times), 4)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--budget", type=int, default=15000)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--skip-truth", action="store_true")
    ap.add_argument("--driver-only", action="store_true",
                    help="only the driver's ask time, from OUT/k1_seq_r0 of an earlier run")
    a = ap.parse_args()
    if a.driver_only:
        print(json.dumps(driver_constant(Path(a.out) / "k1_seq_r0")))
        return
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    res: dict = {"machine": f"{os.cpu_count()} cores", "budget": a.budget, "seed": a.seed,
                 "search": []}
    for r in range(a.rounds):
        for name, k, coll in (("k1_seq", 1, "sequential"), ("k2_seq", 2, "sequential"),
                              ("k1_auto", 1, "auto")):
            m = search(out, f"{name}_r{r}", k, coll, a.budget, a.seed)
            m["name"], m["round"] = name, r
            res["search"].append(m)
            print(json.dumps(m), flush=True)
    res["rates"] = rates(out / "k1_seq_r0")
    res["driver"] = driver_constant(out / "k1_seq_r0")
    print(json.dumps(res["rates"]), flush=True)
    res["spawn"] = spawn_constant(out)
    res["ray"] = ray_constants()
    print(json.dumps(res["ray"]), flush=True)
    if not a.skip_truth:
        res["truth"] = []
        for name, extra in (("truth_serial", []), ("truth_k2", ["--concurrent", "2"])):
            m = timed([PY, "-m", "wfrl", "exhaustive", "--protocol", "recipe", "--repeats", "5",
                       "--out", str(out / name), *extra], out / f"{name}.log")
            m["name"] = name
            res["truth"].append(m)
            print(json.dumps(m), flush=True)
    (out / "scale_measure.json").write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
