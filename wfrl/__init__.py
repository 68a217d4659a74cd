"""wfrl: workflow-conditioned PPO for CAGE Challenge 2 blue agents.

Importing the package is cheap: torch, CybORG and the compiled core load only where they are used.

From Python (wfrl.api): wfrl.train(**settings) and wfrl.search(**settings) are
`python -m wfrl train` (with and without `workflow`; the flags' names with underscores),
wfrl.load_agent(checkpoint) a policy as a CAGE2 agent.
"""

from wfrl._version import __version__

__all__ = ["__version__", "train", "search", "load_agent"]


def __getattr__(name):
    # wfrl.train(), wfrl.load_agent() (wfrl.api), loaded on use so that importing wfrl stays cheap;
    # wfrl.search is the subpackage, callable the same way (wfrl/search/__init__.py)
    if name in ("train", "load_agent"):
        from wfrl import api
        return getattr(api, name)
    if name == "search":
        import importlib
        return importlib.import_module("wfrl.search")
    raise AttributeError(f"module 'wfrl' has no attribute {name!r}")
