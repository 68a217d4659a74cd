"""Command line: parse into validated configs and hand over (wfrl.cli.parser builds the parser,
wfrl.cli.commands runs each command). No training logic lives here.

Every user error ends as one line on stderr and exit status 2, never a traceback.
"""
from __future__ import annotations

import errno
import sys

from wfrl.cli.commands import COMMANDS
from wfrl.cli.parser import apply_config, build_parser
from wfrl.config.run import compiled_step_setting
from wfrl.errors import RecordWriteError, UserError

EXIT_USAGE = 2


def _after_write_failure(a) -> str:
    """What continues a run that stopped because a record could not be written."""
    if a.command == "train":   # a search or a single run: both resume
        from wfrl.config.run import SearchConfig
        run = a.resume or getattr(a, "out", None) or SearchConfig.out
        return f"then `wfrl train --resume {run}` continues the run"
    if a.command == "exhaustive":
        return "then the same command continues the run"
    return "then run the command again"


# A write that fails for these reasons is the machine's state, not a bug: one line, exit 2.
_DISK_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS)


def main(argv=None) -> int:
    args = None
    try:
        compiled_step_setting()            # a bad WFRL_COMPILED_STEP: one line, before any work
        parser = build_parser()
        args = parser.parse_args(argv)
        if getattr(args, "config", None) is not None:
            apply_config(parser, args)
        return COMMANDS[args.command](args)
    except OSError as exc:
        if exc.errno not in _DISK_ERRNOS or args is None:
            raise
        failed = RecordWriteError(exc.filename or "a record of the run", exc)
        print(f"wfrl: error: {failed}, {_after_write_failure(args)}", file=sys.stderr)
        return EXIT_USAGE
    except RecordWriteError as exc:
        print(f"wfrl: error: {exc}, {_after_write_failure(args)}", file=sys.stderr)
        return EXIT_USAGE
    except UserError as exc:
        print(f"wfrl: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ModuleNotFoundError as exc:   # a command whose extra is not installed
        from wfrl.errors import missing_extra
        cmd = "wfrl" if args is None else f"wfrl {args.command}"
        missing = missing_extra(exc, cmd)
        if missing is None:
            raise
        print(f"wfrl: error: {missing}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("wfrl: interrupted", file=sys.stderr)
        return 130
    except SystemExit as exc:
        # SIGTERM while shared memory is held: wfrl.collect.shm unlinked it and exits 128+signum.
        if isinstance(exc.code, int) and exc.code >= 128:
            print(f"wfrl: terminated (signal {exc.code - 128})", file=sys.stderr)
        raise


if __name__ == "__main__":
    sys.exit(main())
