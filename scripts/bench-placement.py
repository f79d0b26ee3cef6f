#!/usr/bin/python3
"""How fast a cluster takes a burst of new queues: a 2-node cluster (wlm
plugin, the rule `* -> node:n2`), one client connection to n1 attaching a
sender to each of N never-used queues at once and sending one message on
each; prints the time until every message was accepted (each attach is a
placement at n1's WLM worker, then a relayed link to n2).

  scripts/bench-placement.py [--wharfd PATH] [--counts 2000,6000] [--rounds 2]
  WHARF_METADATA=etcd scripts/bench-placement.py ...   (a 3-member etcd)

Uses the cluster fixtures of interop-tests/python (Debian's python3-qpid-proton,
which only /usr/bin/python3 sees). Several --wharfd paths alternate round by
round, to compare two builds in one run."""
import argparse
import os
import sys
import time

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(root, "interop-tests", "python"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--wharfd", action="append",
                    help="wharfd binary (repeatable; default build-release/bin/wharfd)")
    ap.add_argument("--counts", default="2000,6000", help="new queues per burst (default 2000,6000)")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    binaries = args.wharfd or [os.path.join(root, "build-release", "bin", "wharfd")]
    os.environ["WHARFD"] = binaries[0]  # the fixtures read it at import
    import wharfd_process
    from proton.reactor import Container
    from cluster_util import Cluster
    from test_cluster_relay import ManyQueues, PINNED
    for rnd in range(args.rounds):
        for binary in binaries:
            wharfd_process.WHARFD = binary
            for n in [int(x) for x in args.counts.split(",")]:
                cluster = Cluster(n=2, wlm=dict(PINNED, **{"lease-ttl": 5}))
                try:
                    start = time.monotonic()
                    burst = ManyQueues(cluster.nodes[0].url, "burst-r%d" % rnd, n, timeout=120)
                    Container(burst).run()
                    took = time.monotonic() - start
                finally:
                    cluster.stop()
                status = "ok" if not burst.errors else "errors: %s" % burst.errors[:2]
                print("round %d  %s  queues %d  accepted %d  %.2f s  %.0f queues/s  %s" % (
                    rnd + 1, binary, n, len(burst.accepted), took, len(burst.accepted) / took, status), flush=True)


if __name__ == "__main__":
    main()
