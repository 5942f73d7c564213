"""Cluster backends: where a run's ZooKeeper and brokers live, and how faults reach them.

``docker`` runs each node in a container on a private network; ``local`` runs each in its
own network namespace on a bridge (``netns``); both build on ``images`` (Docker images from
Debian packages), ``readiness`` (when a node serves), ``faketime`` (moving a broker's wall
clock) and ``cleanup`` (nothing left behind, even after a crash). ``zk_view`` reads the live
cluster's roles from ZooKeeper for the nemeses.
"""
