"""Links and sessions that come and go on one long-lived connection, and the
memory a node holds while they do."""
from proton import Endpoint


def rss_kb(pid):
    """The resident set of process `pid`, in KiB."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS for pid %d" % pid)


def churn(conn, address, count):
    """Attach and detach `count` links to `address` on the BlockingConnection
    `conn`, senders and receivers in turn; every tenth has a session of its
    own, which the client ends (as JMS clients do with a session per use)."""
    for i in range(count):
        if i % 10 == 0:
            ssn = conn.conn.session()
            ssn.open()
            rcv = ssn.receiver("churn-%d" % i)
            rcv.source.address = address
            rcv.open()
            conn.wait(lambda: rcv.state & Endpoint.REMOTE_ACTIVE, msg="attach in a session of its own")
            rcv.close()  # with the end, in one write
            ssn.close()
            conn.wait(lambda: ssn.state & Endpoint.REMOTE_CLOSED, msg="session end")
        elif i % 2:
            conn.create_sender(address).close()
        else:
            conn.create_receiver(address, credit=1).close()


def growth_kb(conn, address, pids, warm=300, count=2000):
    """How much each process in `pids` grew (KiB) over `count` links that came
    and went, after `warm` of them (allocator pools, first-use tables)."""
    churn(conn, address, warm)
    before = [rss_kb(p) for p in pids]
    churn(conn, address, count)
    return [rss_kb(p) - b for p, b in zip(pids, before)]
