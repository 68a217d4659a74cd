import pytest


def _cyborg_available():
    from wfrl.envs.cyborg import available
    return available()


CYBORG = _cyborg_available()


def pytest_collection_modifyitems(config, items):
    skip = pytest.mark.skip(reason="CybORG is not installed (pip install 'wfrl[cyborg]' and "
                                   "gym-csle-cyborg --no-deps; scripts/setup.sh does it)")
    for item in items:
        if "cyborg" in item.keywords and not CYBORG:
            item.add_marker(skip)
