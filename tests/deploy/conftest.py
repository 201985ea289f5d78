import pytest

from .chart import helm_binary


@pytest.fixture(scope="session")
def helm_path():
    return helm_binary()
