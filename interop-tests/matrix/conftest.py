"""The interop matrix's fixtures: a 3-node cluster whose nodes have three
listeners each (default frames, max-frame-size 4096, 1 MiB), and the report
the tests fill in and docs/interop.md is written from."""
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))

from cluster_util import Cluster, free_port  # noqa: E402
from wharfd_process import Wharfd  # noqa: E402

import report  # noqa: E402


class MatrixNode:
    def __init__(self, wharfd, small, big):
        self.wharfd, self.small_port, self.big_port = wharfd, small, big
        self.node_id, self.url, self.port, self.pid = wharfd.node_id, wharfd.url, wharfd.port, wharfd.pid
        self.proc, self.data_dir = wharfd.proc, wharfd.data_dir

    @property
    def small_url(self):
        return "127.0.0.1:%d" % self.small_port

    @property
    def big_url(self):
        return "127.0.0.1:%d" % self.big_port

    def stop(self):
        return self.wharfd.stop()


class MatrixCluster(Cluster):
    """Every queue on n2 (a rule), so n2 is 'the owner' and n1 relays;
    queues named redir-* are served by redirect instead."""

    def _start(self, node_id, data_dir=None):
        for attempt in range(5):
            main, small, big = free_port(), free_port(), free_port()
            text = ('listen = ["127.0.0.1:%d"]\nlog-level = "warn"\n' % main) + self._config(node_id)
            text += '\n[[listener]]\naddress = "127.0.0.1:%d"\nmax-frame-size = 4096\n' % small
            text += '\n[[listener]]\naddress = "127.0.0.1:%d"\nmax-frame-size = 1048576\n' % big
            try:
                return MatrixNode(Wharfd(config_text=text, node_id=node_id, data_dir=data_dir, listen=None),
                                  small, big)
            except RuntimeError as e:
                if "cannot listen" not in str(e) or attempt == 4:
                    raise


@pytest.fixture(scope="session")
def cluster():
    c = MatrixCluster(n=3, wlm={"lease-ttl": 1, "poll-interval": 0.05, "rules": '["* -> node:n2"]',
                                "mode-rules": '["redir-* -> redirect"]'})
    yield c
    c.stop()


def pytest_sessionfinish(session, exitstatus):
    report.write()
