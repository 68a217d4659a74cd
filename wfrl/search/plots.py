"""PNG plots of a search run: learning curves per workflow, and the GP posterior over all 120."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from wfrl.runlog import atomic_write_bytes, read_csv
from wfrl.workflow import Workflow


def _save(fig, path: Path) -> None:
    import io
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    atomic_write_bytes(path, buf.getvalue())


def plot_run(run: Path, opt, report) -> list[Path]:
    """learning_curves.png (reward and compliance per update, one colour per workflow) and
    search_posterior.png: what the search learned — reward (posterior mean ± sd, visits) and
    probability of feasibility (with every visit's compliance) for all 120 workflows, grouped by
    the order relation that best separates feasible from infeasible visits."""
    import matplotlib
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    run = Path(run)
    written = []
    rows = read_csv(run / "training_log.csv")

    # Learning curves: env reward and compliance against the search's episode counter, one
    # colour per workflow (a workflow visited twice continues its own colour).
    fig, (ax_r, ax_c) = plt.subplots(2, 1, figsize=(11, 7), sharex=True)
    by_wf: dict[str, list[dict]] = {}
    for r in rows:
        by_wf.setdefault(r["Workflow_Order"], []).append(r)
    cmap = plt.get_cmap("tab20")
    for i, (name, rs) in enumerate(by_wf.items()):
        x = [int(r["Total_Episodes_Sampled"]) for r in rs]
        c = cmap(i % 20)
        label = Workflow.parse(name).arrow() if len(by_wf) <= 12 else None
        ax_r.plot(x, [float(r["Env_Reward"]) for r in rs], ".", ms=3, color=c, label=label)
        ax_c.plot(x, [float(r["Compliance"]) for r in rs], ".", ms=3, color=c)
    ax_r.set_ylabel("mean env reward per update")
    ax_c.set_ylabel("mean compliance per update")
    ax_c.set_xlabel("episodes sampled by the search")
    ax_r.set_title(f"learning curves of {len(by_wf)} workflows")
    if by_wf and len(by_wf) <= 12:
        ax_r.legend(fontsize=7, loc="lower right")
    path = run / "learning_curves.png"
    _save(fig, path)
    plt.close(fig)
    written.append(path)

    written.append(plot_posterior(run / "search_posterior.png", opt, report))
    return written


def plot_posterior(path: Path, opt, report) -> Path:
    import matplotlib
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    from wfrl.search.gp import ALL_EMBEDDED, PAIRS
    from wfrl.workflow import UNIT_TYPES
    post = opt.posterior()
    mu, sd, pf = post.mean, post.sd, post.p_feasible
    n = len(mu)
    names: tuple[str, ...] | list[str]
    if report.relations:
        r = report.relations[0]
        k = PAIRS.index((min(r.first, r.second), max(r.first, r.second)))
        sign = 1.0 if r.first < r.second else -1.0
        holds = ALL_EMBEDDED[:, k] == sign
        names = (f"{UNIT_TYPES[r.first]} before {UNIT_TYPES[r.second]}",
                 f"{UNIT_TYPES[r.second]} before {UNIT_TYPES[r.first]}")
        groups = [np.flatnonzero(~holds), np.flatnonzero(holds)]
        names = names[::-1]
    else:
        groups, names = [np.arange(n)], ["all workflows"]
    order = np.concatenate([g[np.argsort(-mu[g], kind="stable")] for g in groups])
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n)
    xs = np.arange(n)
    fig, (ax_r, ax_f) = plt.subplots(2, 1, figsize=(12, 7), sharex=True,
                                     gridspec_kw={"height_ratios": [3, 2]})
    ax_r.plot(xs, mu[order], color="C0", lw=1.2, label="posterior mean reward")
    ax_r.fill_between(xs, (mu - sd)[order], (mu + sd)[order], color="C0", alpha=0.25,
                      label="± 1 sd")
    ok = [h for h in opt.history if h["compliance"] >= opt.theta and h["reward"] is not None]
    bad = [h for h in opt.history if h["compliance"] < opt.theta and h["reward"] is not None]
    if ok:
        ax_r.errorbar([pos[h["workflow"]] for h in ok], [h["reward"] for h in ok],
                      yerr=[h["se"] for h in ok], fmt="o", color="C2", ms=4,
                      label="visit that reached θ")
    if bad:
        ax_r.plot([pos[h["workflow"]] for h in bad], [h["reward"] for h in bad], "x",
                  color="C3", ms=5, label="visit below θ (not modelled)")
    ax_f.bar(xs, pf[order], color="C1", alpha=0.6, width=1.0, label="P(feasible)")
    if opt.history:
        ax_f.plot([pos[h["workflow"]] for h in opt.history],
                  [h["compliance"] for h in opt.history], "k.", ms=4,
                  label="visit's final compliance")
    ax_f.axhline(opt.theta, color="k", lw=0.8, ls="--")
    ax_f.set_ylim(0, 1.02)
    edge = 0
    for g, name in zip(groups, names):
        for ax in (ax_r, ax_f):
            ax.axvline(edge - 0.5, color="grey", lw=0.8)
        ax_f.text(edge + len(g) / 2, 0.04, name, ha="center", fontsize=9)
        edge += len(g)
    ax_r.set_ylabel("env reward")
    ax_f.set_ylabel("P(feasible) / compliance")
    ax_f.set_xlabel("workflows, grouped by the order relation that decides feasibility, "
                    "sorted by posterior mean within a group")
    import textwrap
    ax_r.set_title("\n".join(textwrap.wrap(report.sentence, 120)), fontsize=9)
    ax_r.legend(fontsize=8, loc="lower left")
    ax_f.legend(fontsize=8, loc="center right")
    _save(fig, path)
    plt.close(fig)
    return path
