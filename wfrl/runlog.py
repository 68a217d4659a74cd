"""Run records: the run directory, JSON/CSV logs and checkpoints.

Everything is written so that an interrupted run never leaves a damaged file: JSON and checkpoints
go to a temporary file that replaces the target atomically; CSV rows are appended, flushed and
fsynced one update at a time.
"""
from __future__ import annotations

import contextlib
import csv
import fcntl
import io
import json
import os
import tempfile
import warnings
from pathlib import Path

from wfrl.errors import RecordWriteError, UserError

CHECKPOINT_FORMAT = "wfrl/ppo-checkpoint"
CHECKPOINT_VERSION = 1
RUN_MARKERS = ("experiment_config.json", "training_log.csv", "checkpoint.pt", "search_state.pt")


LOCK_FILE = ".wfrl.lock"


class RunLock:
    """One wfrl process per run directory: an exclusive flock(2) on DIR/.wfrl.lock, taken before
    anything in DIR is read or written and held until release() (or the end of the process).
    The kernel drops the lock when its holder dies, however it dies, so the lock left by a
    SIGKILLed run never blocks a later --resume; the file itself (holding the pid of the last
    holder, for the message) stays and means nothing on its own."""

    def __init__(self, path: str | os.PathLike, what: str = "run"):
        self.path = Path(path)
        self._fd = None
        try:
            fd = os.open(self.path / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise UserError(f"output directory {self.path} is not writable: {exc.strerror}") \
                from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                holder = os.read(fd, 32).decode(errors="replace").strip() or "?"
            finally:
                os.close(fd)
            raise UserError(f"{self.path} is in use by another wfrl process (pid {holder}); "
                            f"wait for it to end, or choose another --out for this {what}") \
                from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)             # closing the only descriptor drops the flock

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()

    def __del__(self):
        self.release()


def make_dir(path: str | os.PathLike) -> Path:
    """`path` as a directory, created if needed; UserError if it is a file or cannot be made."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise UserError(f"output path {path} is not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create output directory {path}: {exc.strerror}") from None
    return path


@contextlib.contextmanager
def locked_dir(path: str | os.PathLike, what: str = "run"):
    """Create `path` if needed and hold its RunLock for the duration of the block."""
    with RunLock(make_dir(path), what) as lock:
        yield lock


class RunDir:
    """The --out directory of a run. Checks that it is usable before anything is written."""

    def __init__(self, path: str | os.PathLike, force: bool = False):
        self.path = make_dir(path)
        try:
            fd, probe = tempfile.mkstemp(dir=self.path, prefix=".wfrl-probe-")
            os.close(fd)
            os.unlink(probe)
        except OSError as exc:
            raise UserError(f"output directory {self.path} is not writable: {exc.strerror}") from None
        existing = [m for m in RUN_MARKERS if (self.path / m).exists()]
        if existing and not force:
            raise UserError(f"{self.path} already holds a run ({existing[0]}); choose another --out"
                            " or pass --force to replace it")
        self.force = force

    def file(self, name: str) -> Path:
        return self.path / name


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Replace `path` with `data` (write a temporary file beside it, fsync, rename): readers see
    the old file or the new one. A failed write (a full disk) leaves the old file and raises
    RecordWriteError naming `path`."""
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    except OSError as exc:
        raise RecordWriteError(path, exc) from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise RecordWriteError(path, exc) from None
        raise


def write_json(path: Path, obj) -> None:
    atomic_write_bytes(Path(path), (json.dumps(obj, indent=2, sort_keys=True) + "\n").encode())


class CsvLog:
    """Append-only CSV with a fixed header; each row is durable once append() returns."""

    def __init__(self, path: Path, columns: list[str], fresh: bool = True):
        self.path = Path(path)
        self.columns = list(columns)
        if fresh or not self.path.exists():
            buf = io.StringIO()
            csv.writer(buf).writerow(self.columns)
            atomic_write_bytes(self.path, buf.getvalue().encode())

    def append(self, row: dict) -> None:
        """Append one row, durably; RecordWriteError naming the file when it cannot be written
        (a row cut short by a full disk lies beyond the rows a resume keeps)."""
        buf = io.StringIO()
        csv.DictWriter(buf, self.columns, extrasaction="raise").writerow(row)
        try:
            with open(self.path, "a", encoding="utf-8", newline="") as f:
                f.write(buf.getvalue())
                f.flush()
                os.fsync(f.fileno())
        except OSError as exc:
            raise RecordWriteError(self.path, exc) from None


def eta(episodes_left: int, rate: float) -> str:
    """The time the budget's remaining episodes take at `rate` episodes/s, as 1h02m, 3m05s, 42s
    (an upper bound for a run that may stop early on compliance)."""
    s = int(round(episodes_left / rate)) if rate > 0 else 0
    h, m = divmod(s // 60, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s % 60:02d}s" if m else f"{s}s"


# training_log.csv columns → TensorBoard tags, under the names SB3 and CleanRL users read
# (charts/, losses/); wfrl's own quantities under wfrl/.
TB_TAGS = {"Env_Reward": "charts/episodic_return", "Policy_Loss": "losses/policy_loss",
           "Value_Loss": "losses/value_loss", "Entropy": "losses/entropy",
           "Approx_KL": "losses/approx_kl", "Compliance": "wfrl/compliance",
           "Alignment_Bonus": "wfrl/alignment_bonus", "Avg_Fixes": "wfrl/fixes_per_episode",
           "Workflow_ID": "wfrl/workflow_id"}
TB_STATS = {"clip_frac": "losses/clipfrac", "explained_variance": "losses/explained_variance",
            "learning_rate": "charts/learning_rate"}


class TensorBoardLog:
    """Training curves as TensorBoard event files (torch.utils.tensorboard's writer), beside
    training_log.csv: per update, at the global step (environment steps so far), every TB_TAGS
    column of the log row, the learner's TB_STATS, charts/SPS (environment steps per second of
    wall time) and whatever else `extra` names (the search: its visits)."""

    def __init__(self, logdir, purge_step: int | None = None):
        """purge_step: just past a resumed run's last committed global step; points at or past
        it (of an update the run redoes) are dropped from the events already written."""
        SummaryWriter = self.check()
        try:
            self.writer = SummaryWriter(log_dir=str(logdir), purge_step=purge_step)
        except OSError as exc:
            raise UserError(f"--tensorboard {logdir}: cannot write there ({exc.strerror})") \
                from None

    @staticmethod
    def check():
        """torch's SummaryWriter, or a one-line UserError when the tensorboard package is
        missing."""
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            raise UserError("--tensorboard needs the tensorboard package: pip install "
                            "'wfrl[tensorboard]' (or pip install tensorboard)") from None
        return SummaryWriter

    def update(self, row: dict, stats: dict, step: int, sps: float, extra=None) -> None:
        add = self.writer.add_scalar
        for col, tag in TB_TAGS.items():
            add(tag, float(row[col]), step)
        for key, tag in TB_STATS.items():
            if key in stats:
                add(tag, float(stats[key]), step)
        add("charts/SPS", float(sps), step)
        for tag, value in (extra or {}).items():
            add(tag, float(value), step)
        self.writer.flush()

    def scalars(self, values: dict, step: int) -> None:
        """Any named scalars at one global step (a red learner's curves)."""
        for tag, value in values.items():
            self.writer.add_scalar(tag, float(value), step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


@contextlib.contextmanager
def tensorboard_log(logdir, committed: dict | None):
    """The run's TensorBoardLog (None without a log directory), closed at the end; for a resumed
    run (`committed`: its last commit) the points past that commit's global step are purged."""
    if not logdir:
        yield None
        return
    from wfrl.envs.base import EP_LEN
    purge = committed["resume"]["episodes"] * EP_LEN + 1 if committed else None
    tb = TensorBoardLog(logdir, purge)
    try:
        yield tb
    finally:
        tb.close()


def write_csv_atomic(path, columns: list[str], rows: list[dict]) -> None:
    """A whole CSV at once: readers see the old file or the new one, never a part."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, list(columns), extrasaction="raise")
    w.writeheader()
    w.writerows(rows)
    atomic_write_bytes(Path(path), buf.getvalue().encode())


def truncate_csv(path: Path, columns: list[str], rows: int) -> None:
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
    atomic_write_bytes(Path(path), b"\n".join(lines[:rows + 1]) + b"\n")


def read_csv(path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def save_checkpoint(path: Path, payload: dict) -> None:
    import torch
    buf = io.BytesIO()
    torch.save({"format": CHECKPOINT_FORMAT, "format_version": CHECKPOINT_VERSION, **payload}, buf)
    atomic_write_bytes(Path(path), buf.getvalue())


PRETRAINED_PREFIX = "pretrained:"


def pretrained_names() -> list[str]:
    """Names of the policies shipped with the package (wfrl/pretrained/NAME.pt)."""
    from importlib import resources
    folder = resources.files("wfrl") / "pretrained"
    if not folder.is_dir():
        return []
    return sorted(p.name[:-3] for p in folder.iterdir() if p.name.endswith(".pt"))


def resolve_checkpoint(path) -> Path:
    """A checkpoint path, or `pretrained:NAME` for a policy shipped with the package."""
    text = str(path)
    if not text.startswith(PRETRAINED_PREFIX):
        return Path(path)
    from importlib import resources
    name = text[len(PRETRAINED_PREFIX):]
    names = pretrained_names()
    if name not in names:
        raise UserError(f"no pretrained policy {name!r} (shipped: {', '.join(names) or 'none'})")
    return Path(str(resources.files("wfrl") / "pretrained" / f"{name}.pt"))


def load_checkpoint(path) -> dict:
    """Load and check a wfrl checkpoint (a path or `pretrained:NAME`); any problem becomes a
    one-line UserError."""
    import torch
    path = resolve_checkpoint(path)
    if not path.is_file():
        raise UserError(f"checkpoint {path} does not exist")
    try:
        with warnings.catch_warnings():  # a damaged file gets one line, not torch's warnings
            warnings.simplefilter("ignore")
            ck = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many types for damaged files
        reason = type(exc).__name__
        raise UserError(f"cannot read checkpoint {path}: corrupt or not a torch file "
                        f"({reason[:120]})") from None
    if not isinstance(ck, dict) or ck.get("format") != CHECKPOINT_FORMAT:
        raise UserError(f"{path} is not a wfrl checkpoint")
    if ck.get("format_version") != CHECKPOINT_VERSION:
        raise UserError(f"{path} has checkpoint format version {ck.get('format_version')};"
                        f" this wfrl reads version {CHECKPOINT_VERSION}")
    # an order-conditioned policy shipped for any workflow (pretrained:any_workflow) names none,
    # nor does a red attacker's (side "red", wfrl.training.attack)
    free = ck.get("any_workflow") or ck.get("side") == "red"
    for key in ("model", "hidden") + (() if free else ("workflow",)):
        if key not in ck:
            raise UserError(f"checkpoint {path} lacks {key!r}")
    return ck


BASE_POLICY = -1  # the "workflow index" of a search's pretrained base policy


def checkpoint_path(run: Path, wf_index: int) -> Path:
    """Where a search keeps the policy of workflow wf_index (BASE_POLICY: the pretrained base)."""
    if wf_index == BASE_POLICY:
        return Path(run) / "checkpoints" / "base.pt"
    return Path(run) / "checkpoints" / f"wf_{wf_index:03d}.pt"
