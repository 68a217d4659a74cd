import pytest

from wfrl.envs.cyborg import available


def pytest_collection_modifyitems(config, items):
    if available():
        return
    skip = pytest.mark.skip(reason="CybORG is not installed (scripts/setup.sh installs it)")
    for item in items:
        if "cyborg" in item.keywords:
            item.add_marker(skip)
