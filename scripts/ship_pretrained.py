"""Write a trained checkpoint as a pretrained policy shipped with the package: the actor-critic
weights, the network description, the workflow and the settings that matter for evaluation, plus
how it was made — no optimiser state, so the file stays small.

    .venv/bin/python scripts/ship_pretrained.py RUN/best.pt critical_first --command "wfrl train ..."
"""
import argparse
from pathlib import Path

from wfrl.runlog import load_checkpoint, save_checkpoint

KEEP = ("model", "hidden", "net", "workflow", "workflow_id", "episodes", "red_agent", "selection",
        "version", "side", "defender")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoint")
    ap.add_argument("name")
    ap.add_argument("--command", required=True, help="the command that trained it")
    ap.add_argument("--wall-time", default="", help="its wall time on the training machine")
    ap.add_argument("--any-workflow", action="store_true",
                    help="an order-conditioned policy (a search's base): ship it without a "
                         "workflow of its own, so every use names one (--workflow W)")
    ap.add_argument("--out-dir", default=None,
                    help="where NAME.pt is written (default: the package's wfrl/pretrained/, "
                         "and wfrl/pretrained/reds/ for a red's checkpoint: learned:NAME)")
    a = ap.parse_args(argv)
    ck = load_checkpoint(a.checkpoint)
    cfg = ck.get("config", {})
    out = {k: ck[k] for k in KEEP if k in ck}
    if a.any_workflow:
        out.pop("workflow", None)
        out.pop("workflow_id", None)
        out["any_workflow"] = True
    out["config"] = {k: cfg[k] for k in ("alignment_lambda", "count_foothold", "red_agent",
                                         "compliance_threshold", "seed", "backend") if k in cfg}
    out["provenance"] = {"command": a.command, "wall_time": a.wall_time}
    red = ck.get("side") == "red"
    if red:   # a red's: what it was trained against, not a workflow of its own
        out["config"] = {k: cfg[k] for k in ("backend", "seed") if k in cfg}
    pretrained = Path(__file__).resolve().parents[1] / "wfrl" / "pretrained"
    dst = Path(a.out_dir or (pretrained / "reds" if red else pretrained)) / f"{a.name}.pt"
    dst.parent.mkdir(parents=True, exist_ok=True)
    save_checkpoint(dst, out)
    print(f"wrote {dst} ({dst.stat().st_size // 1024} KB)")


if __name__ == "__main__":
    main()
