"""PNG plots of a search run: learning curves per workflow, and the GP posterior over all 120."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from wfrl.runlog import _atomic_write_bytes, read_csv
from wfrl.workflow import Workflow


def _save(fig, path: Path) -> None:
    import io
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    _atomic_write_bytes(path, buf.getvalue())


def plot_run(run: Path, mu: np.ndarray, sd: np.ndarray, observations: list[dict],
             adjusted: bool = False) -> list[Path]:
    """adjusted: the observations' rewards were moved to the common training level the detrended
    GP compares at (so they sit on the posterior's scale)."""
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

    # GP posterior over the 120 workflows, sorted by posterior mean; observations marked.
    order = np.argsort(-mu, kind="stable")
    pos = np.empty_like(order)
    pos[order] = np.arange(len(order))
    fig, ax = plt.subplots(figsize=(12, 5))
    xs = np.arange(len(mu))
    ax.plot(xs, mu[order], color="C0", lw=1.5, label="posterior mean")
    ax.fill_between(xs, (mu - sd)[order], (mu + sd)[order], color="C0", alpha=0.25,
                    label="± 1 sd")
    if observations:
        ox = [pos[o["workflow"]] for o in observations]
        ax.errorbar(ox, [o["reward"] for o in observations],
                    yerr=[o["se"] for o in observations], fmt="o", color="C3", ms=4,
                    label="observed (final update of a compliant visit)"
                    + (", at the common training level" if adjusted else ""))
        best = int(order[0])
        ax.annotate(Workflow.from_index(best).arrow(), (0, mu[best]), xytext=(8, 8),
                    textcoords="offset points", fontsize=8)
    ax.set_xlabel("workflows, sorted by posterior mean")
    ax.set_ylabel("env reward")
    ax.set_title("GP posterior over all 120 workflows")
    ax.legend(fontsize=8, loc="lower left")
    path = run / "gp_posterior.png"
    _save(fig, path)
    plt.close(fig)
    written.append(path)
    return written
