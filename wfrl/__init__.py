"""wfrl: workflow-conditioned PPO for CAGE Challenge 2 blue agents.

Importing the package is cheap: torch, CybORG and the compiled core load only where they are used.

From Python: wfrl.train(**settings) and wfrl.search(**settings) are `python -m wfrl train` (with
and without `workflow`; the flags' names with underscores), wfrl.load_agent(checkpoint) a policy
as a CAGE2 agent.
"""

__version__ = "0.1.0"

# The thread rule of `python -m wfrl` (wfrl.__main__) and of wfrl.train() / wfrl.search()
# (wfrl.train.command_threads), here where nothing imports numpy or torch before it applies.
SPIN_COUNT = "10000"


def quiet_openmp(environ) -> None:
    """GOMP_SPINCOUNT=10000 for this process and its workers, unless the user set it or an
    OMP_WAIT_POLICY. How long an idle OpenMP thread spins before it sleeps: 300,000 turns of
    `pause` by default. It matters where torch's OpenMP pool has more than one thread (the
    user's OMP_NUM_THREADS, --learner-threads N): with two in a default run, the pool worked only
    for the orthogonal initialisation of each visit's new learner (MKL's QR), and then its idle
    thread spun for 3.2 of the first 50 s (0.2 s with this setting), CPU taken from the
    collectors and the learner. 10,000 turns (well under a millisecond) still hand back-to-back
    operations of a multi-threaded learner (--learner-threads N) or of `wfrl bench train`'s
    comparison paths over without a sleep: their rates are unchanged (docs/learner.md), where
    OMP_WAIT_POLICY=PASSIVE (no spin at all) slowed them. It changes when an idle thread
    sleeps, never what a computation gives (the same training log). Must run before torch is
    imported: OpenMP reads it once, when it loads."""
    if "OMP_WAIT_POLICY" in environ or "GOMP_SPINCOUNT" in environ:
        return
    environ["GOMP_SPINCOUNT"] = SPIN_COUNT


def one_thread_by_default(environ) -> None:
    """OMP_NUM_THREADS=1 for this process and its workers unless the user set it. A run's
    results depend on the thread count of every pool that sums for it (torch's and OpenBLAS's,
    sized from the cores when unset). The learner sets its own count around each update, but
    other work runs on those pools as they are: each new learner's orthogonal initialisation,
    work on other threads (the collect-ahead thread builds the next update's batch), the
    feasibility model's linear algebra. Left to the machine, the same seed and settings give
    other numbers on a machine with another core count (docs/learner.md, "Threads").
    One thread is what the default run uses anyway: the learner sets its own count for each
    update (--learner-threads), and the collectors' workers play one episode at a time. Must
    run before numpy and torch are imported: both read it once, when they load."""
    environ.setdefault("OMP_NUM_THREADS", "1")


def load_agent(checkpoint: str, workflow: str | None = None):
    """A checkpoint (a file or pretrained:NAME) as a CAGE2 agent with get_action(observation,
    action_space) and end_episode(), played greedily: wfrl.agents.CheckpointAgent."""
    from wfrl.agents import load_agent as load
    return load(checkpoint, workflow)


def __getattr__(name):
    # wfrl.train and wfrl.search are callable modules (the commands from Python): loaded on use
    if name in ("train", "search"):
        import importlib
        return importlib.import_module(f"wfrl.{name}")
    raise AttributeError(f"module 'wfrl' has no attribute {name!r}")
