"""Errors that the command line turns into one line on stderr and exit status 2."""


class UserError(Exception):
    """Bad input from the user: a flag, a workflow, a checkpoint, a missing extra."""


class BackendUnavailable(UserError):
    """A backend's optional dependency is not installed."""


# packages of an extra (pyproject.toml) that wfrl imports, by their import name
EXTRA_OF_MODULE = {"torch": "train", "sklearn": "train", "scipy": "train", "matplotlib": "train",
                   "threadpoolctl": "train", "ray": "ray", "tensorboard": "tensorboard",
                   "stable_baselines3": "sb3", "sb3_contrib": "sb3"}


def missing_extra(exc: ModuleNotFoundError, what: str) -> "UserError | None":
    """The one-line error for `what` (a command) failing on a package of an extra that is not
    installed, or None if the missing module is not one."""
    top = (exc.name or "").split(".")[0]
    extra = EXTRA_OF_MODULE.get(top)
    if extra is None:
        return None
    hint = (" (the CPU build: pip install torch --index-url https://download.pytorch.org/whl/cpu)"
            if top == "torch" else "")
    return UserError(f"{what} needs {top}, which is not installed: pip install 'wfrl[{extra}]'"
                     f"{hint}")


def check_choice(what: str, value: str, choices) -> str:
    """`value` if it is one of `choices`, else a UserError naming them."""
    if value not in choices:
        raise UserError(f"unknown {what} {value!r} (choose from {', '.join(choices)})")
    return value


class RecordWriteError(UserError):
    """A record of the run could not be written — a full disk, a quota, a read-only or vanished
    directory. The run stops there; every record it committed before stays whole (each file is
    replaced atomically or appended row by row)."""

    def __init__(self, path, exc: OSError):
        import errno
        self.path = str(path)
        self.reason = exc.strerror or type(exc).__name__
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            fix = "free space on that disk"
        elif exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            fix = "make that directory writable"
        else:
            fix = "check that its directory exists and is writable"
        super().__init__(f"cannot write {self.path}: {self.reason}; {fix}")
