"""Workflow search: a Gaussian process over permutations, UCB, the compliance-gated loop.

The package itself is callable: `wfrl.search(**settings)` is `python -m wfrl train` without
`--workflow` from Python (wfrl.train.train_api), returning {"run_dir", "checkpoint", "summary"}."""
import sys
import types


class _CallableModule(types.ModuleType):
    """`wfrl.search(...)` runs the search (the name is this package once it is imported)."""

    def __call__(self, **settings) -> dict:
        from wfrl.errors import UserError
        from wfrl.train import train_api
        if settings.get("workflow") is not None:
            raise UserError("wfrl.search() searches the workflows: use wfrl.train(workflow=...) "
                            "to train one")
        return train_api(settings)


sys.modules[__name__].__class__ = _CallableModule
