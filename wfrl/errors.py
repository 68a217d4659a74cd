"""Errors that the command line turns into one line on stderr and exit status 2."""


class UserError(Exception):
    """Bad input from the user: a flag, a workflow, a checkpoint, a missing extra."""


class BackendUnavailable(UserError):
    """A backend's optional dependency is not installed."""
