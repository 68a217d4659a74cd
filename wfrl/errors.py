"""Errors that the command line turns into one line on stderr and exit status 2."""


class UserError(Exception):
    """Bad input from the user: a flag, a workflow, a checkpoint, a missing extra."""


class BackendUnavailable(UserError):
    """A backend's optional dependency is not installed."""


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
