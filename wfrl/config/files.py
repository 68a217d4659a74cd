"""Settings files: `--config FILE` on every command, a TOML file or a run's saved settings."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from wfrl.errors import UserError

# -- settings files: `--config FILE` on every command -------------------------------------------

# keys of a run directory's experiment_config.json that describe the run, not a setting to repeat
# (where it was written, its version, its resolved workflow); `out` and `force` are left out so a
# run reproduced from its directory goes to a new place instead of onto the old run
RUN_RECORD_ONLY = ("mode", "wfrl_version", "update_step", "workflow_order", "workflow_id", "out",
                   "force")


def is_run_record(path) -> bool:
    """Whether a --config path names a run's saved settings (a directory, or its JSON) rather than
    a TOML file."""
    from pathlib import Path
    p = Path(path)
    return p.is_dir() or p.suffix == ".json"


def load_settings_file(path) -> tuple[dict, str]:
    """The settings in `path`: a TOML file (`episodes = 500`, `backend = "sim"`, keys as the
    flags without dashes, `-` or `_`; a [ppo] table is read like top-level keys), or a run
    directory / its experiment_config.json (the settings the run was started with). Returns
    ({name: value}, what to call the source in errors). Unreadable or malformed: UserError."""
    import json
    from pathlib import Path
    p = Path(path)
    run_record = is_run_record(p)
    if p.is_dir():
        p = p / "experiment_config.json"
    where = f"--config {p}"
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{where}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{where}: cannot be read ({exc.__class__.__name__})") from None
    if run_record:
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise UserError(f"{where}: not valid JSON ({exc})") from None
    else:
        import tomllib
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise UserError(f"{where}: not valid TOML ({exc})") from None
    if not isinstance(data, dict):
        raise UserError(f"{where}: expected a table of settings")
    flat = {}
    for key, value in data.items():
        if run_record and key in RUN_RECORD_ONLY:
            continue
        items: Iterable[tuple[Any, Any]]
        if isinstance(value, dict) and key == "ppo":
            items = value.items()
        else:
            items = [(key, value)]
        for k, v in items:
            if v is None and run_record:
                continue   # a setting the run left at its default
            if isinstance(v, (dict, list)):
                raise UserError(f"{where}: {k!r} must be a single value, got a "
                                f"{'table' if isinstance(v, dict) else 'list'}")
            name = str(k).replace("-", "_")
            if name in flat:
                raise UserError(f"{where}: {name!r} is given twice")
            flat[name] = v
    return flat, where
