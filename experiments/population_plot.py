"""The exploitability curve of population runs (their curve.csv): per defender D0..DR, the return
it loses to its strongest fresh red against its return on B_line, and its B_line return, with
standard errors; one line per run.

    python experiments/population_plot.py OUT/curve.png NAME=RUN_DIR [NAME=RUN_DIR ...]
"""
import csv
import sys
from pathlib import Path


def main(argv):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    out, runs = Path(argv[0]), [a.split("=", 1) for a in argv[1:]]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
    for name, run in runs:
        with open(Path(run) / "curve.csv", newline="") as f:
            rows = list(csv.DictReader(f))
        d = [int(r["Defender"]) for r in rows]
        exp = [float(r["Exploitability"]) for r in rows]
        se = [(float(r["Vs_B_line_SE"]) ** 2 + float(r["Vs_Strongest_Red_SE"]) ** 2) ** 0.5
              for r in rows]
        ax1.errorbar(d, exp, yerr=[2 * s for s in se], marker="o", capsize=3, label=name)
        ax2.errorbar(d, [float(r["Vs_B_line"]) for r in rows],
                     yerr=[2 * float(r["Vs_B_line_SE"]) for r in rows], marker="o", capsize=3,
                     label=name)
    ax1.set(xlabel="defender (round)", ylabel="exploitability (B_line − strongest red)",
            title="Exploitability, fresh best responses")
    ax2.set(xlabel="defender (round)", ylabel="return against B_line, 100 steps",
            title="Against B_line (held-out episodes)")
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    # 64 colours: a quarter of the bytes of the full-colour file, no visible difference
    from PIL import Image
    Image.open(out).convert("RGB").quantize(colors=64, method=Image.Quantize.MEDIANCUT).save(
        out, optimize=True)
    print(f"wrote {out}")


if __name__ == "__main__":
    main(sys.argv[1:])
