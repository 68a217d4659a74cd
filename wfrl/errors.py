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
