"""Compare two runs' logs (training_log.csv, gp_sampling_log.csv) row by row, time columns left
out: prints the first row and columns that differ, or that the logs are the same.

    python compare.py RUN_A RUN_B
"""
import csv
import sys
from pathlib import Path


def timing(column: str) -> bool:
    c = column.lower()
    return "time" in c or "second" in c or "wall" in c or c.endswith("_s")


def first_difference(a: Path, b: Path) -> str:
    ra, rb = list(csv.DictReader(open(a))), list(csv.DictReader(open(b)))
    for i, (x, y) in enumerate(zip(ra, rb)):
        cols = [k for k in x if not timing(k) and x[k] != y.get(k)]
        if cols:
            return f"first differs at row {i}: {', '.join(cols[:4])}"
    return f"same ({len(ra)} and {len(rb)} rows)"


if __name__ == "__main__":
    run_a, run_b = Path(sys.argv[1]), Path(sys.argv[2])
    for log in ("training_log.csv", "gp_sampling_log.csv"):
        print(f"{run_a.name} vs {run_b.name}, {log}: {first_difference(run_a / log, run_b / log)}")
