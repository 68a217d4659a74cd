"""Workflow search: a Gaussian process over permutations, UCB, the compliance-gated loop.

The package itself is callable: `wfrl.search(**settings)` is wfrl.api.search, `python -m wfrl
train` without `--workflow` from Python, returning {"run_dir", "checkpoint", "summary"}."""
import sys
import types


class _CallableModule(types.ModuleType):
    """`wfrl.search(...)` runs the search (the name is this package once it is imported)."""

    def __call__(self, **settings) -> dict:
        from wfrl.api import search
        return search(**settings)


sys.modules[__name__].__class__ = _CallableModule
