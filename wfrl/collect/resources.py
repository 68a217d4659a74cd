"""Will the workers fit? A run's worker processes are checked against this machine's available
memory before any of them starts.

Per-worker resident memory, measured with `wfrl bench collectors` (worker_rss_mb) on the 2-core
machine: a simulator worker ~52 MB (sync, async) and a Ray actor ~114 MB; on CybORG ~67 MB and ~119
MB (CybORG and its scenario; no torch: wfrl.envs.reds.cyborg_agents_on_demand). A run that asks for
more than the machine has would push it into swap or the kernel's OOM killer (which may pick the
learner, or another user's process), so it is refused, in one line, with the number of workers that
fits: refused rather than warned about, because nothing useful comes out of such a run and what it
can take down is not only itself. Workers of a Ray cluster joined with --ray-address live on the
cluster's nodes, which Ray fills by the CPUs they declare; they are not checked here.
"""
from __future__ import annotations

from wfrl.envs.base import backend_engine
from wfrl.errors import UserError

WORKER_MB = {  # resident memory per worker, MB (a little above the measured figures)
    ("sim", "sync"): 60, ("sim", "async"): 60, ("sim", "ray"): 130,
    ("cyborg", "sync"): 80, ("cyborg", "async"): 80, ("cyborg", "ray"): 140,
}
LEARNER_MB = 600  # the learner process itself (torch, batch, buffers)


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def available_mb(meminfo: str = "/proc/meminfo", cgroup: str = "/sys/fs/cgroup") -> float | None:
    """Memory this process can still use, in MB: the machine's MemAvailable, or less where a
    cgroup (v2) limit is set (a container: memory.max − memory.current); None where neither
    says."""
    found = []
    text = _read(meminfo) or ""
    for line in text.splitlines():
        if line.startswith("MemAvailable:"):
            try:
                found.append(int(line.split()[1]) / 1024)
            except (IndexError, ValueError):
                pass
    limit, used = _read(f"{cgroup}/memory.max"), _read(f"{cgroup}/memory.current")
    if limit and used and limit.strip() != "max":
        try:
            found.append(max(0.0, (int(limit) - int(used)) / 2**20))
        except ValueError:
            pass
    return min(found) if found else None


def check_workers_fit(collector: str, backend: str, n_workers: int, ray_address=None,
                      available: float | None = None) -> None:
    """UserError (one line) when n_workers workers of this collector and backend, plus the
    learner, need more memory than this machine has available. The sequential collector has no
    workers; a Ray cluster's actors are placed on its nodes (not checked)."""
    if collector == "sequential" or (collector == "ray" and ray_address):
        return
    per = WORKER_MB.get((backend_engine(backend), collector))
    avail = available_mb() if available is None else available
    if per is None or avail is None:
        return
    need = n_workers * per + LEARNER_MB
    if need > avail:
        fits = max(0, int((avail - LEARNER_MB) // per))
        raise UserError(
            f"--n-workers {n_workers}: {n_workers} {backend} workers ({collector}) need about "
            f"{need / 1024:.1f} GB (~{per} MB each, plus ~{LEARNER_MB} MB for the learner), but "
            f"this machine has {avail / 1024:.1f} GB available; {fits} workers fit")
