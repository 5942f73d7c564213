"""Cluster figures: time from cluster setup to every node ready, per backend.

    python bench/bench_cluster_setup.py [--runs 5] [--brokers 3] [--backend local|docker|both]
                                        [--standin]

"Ready" means ZooKeeper accepts connections and every broker is registered in ZooKeeper
(with --standin, or when the broker is not available, that every node's port is open).
Docker figures are measured with the images already built (the image build, when needed,
is reported separately); the base image build itself is timed by docker/build-base.sh.
Prints each run's figure and the median. Needs root; --backend docker needs a Docker engine.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "fixtures"))

from floodmark.harness.cluster import Cluster, ClusterSpec  # noqa: E402

STANDIN = r"""
import socket, sys
server = socket.create_server(("0.0.0.0", int(sys.argv[1])))
while True:
    server.accept()[0].close()
"""


def measure(backend: str, brokers: int, standin: bool) -> tuple[float, float | None]:
    command = None
    if standin:
        command = [sys.executable if backend == "local" else "python3", "-c", STANDIN, "{port}"]
    cluster: Cluster
    if backend == "local":
        from floodmark.backends.local import LocalCluster

        cluster = LocalCluster(ClusterSpec(brokers=brokers), broker_command=command)
    else:
        from floodmark.backends.docker import DockerCluster

        cluster = DockerCluster(ClusterSpec(brokers=brokers), broker_command=command)
    started = time.monotonic()
    cluster.setup()
    elapsed = time.monotonic() - started
    images = getattr(cluster, "image_seconds", None)
    cluster.teardown()
    return elapsed, images


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--backend", choices=("local", "docker", "both"), default="both")
    parser.add_argument("--standin", action="store_true", help="stand-in brokers (no ZK registration)")
    args = parser.parse_args()
    standin = args.standin or importlib.util.find_spec("floodmark.reference.real.process") is None
    what = "stand-in brokers, ports open" if standin else "real brokers registered in ZooKeeper"
    backends = ("local", "docker") if args.backend == "both" else (args.backend,)
    for backend in backends:
        if backend == "docker":
            measure(backend, 1, True)  # build images first: not part of the figure
        figures = []
        for run in range(args.runs):
            elapsed, images = measure(backend, args.brokers, standin)
            image_note = f" (of which image check {images:.2f} s)" if images is not None else ""
            print(f"{backend} run {run + 1}: {elapsed:.2f} s{image_note}")
            figures.append(elapsed)
        print(f"{backend}: setup to ready, ZooKeeper + {args.brokers} brokers ({what}): "
              f"median {statistics.median(figures):.2f} s over {args.runs} runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
