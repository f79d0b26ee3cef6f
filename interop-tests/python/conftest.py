"""Fixtures: a real wharfd child process on a port the OS picked."""
import pytest

from wharfd_process import Wharfd


@pytest.fixture
def wharfd():
    node = Wharfd()
    yield node
    assert node.stop() == 0


@pytest.fixture
def make_wharfd():
    nodes = []

    def make(*args, **kwargs):
        n = Wharfd(*args, **kwargs)
        nodes.append(n)
        return n

    yield make
    for n in nodes:
        n.stop()
