"""Controller failover with real processes: a new controller takes over and finishes the work.

The controller broker is killed with SIGKILL. While no controller is elected (until its
ZooKeeper session expires) an admin deletes one topic, creates another and asks for a
preferred replica election; the successor must bump the controller epoch and carry all of
it out after re-reading the state.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from reference_processes import ProcessCluster, skip_reason

from floodmark.reference.protocol import zk_layout as zk

pytestmark = [pytest.mark.integration, pytest.mark.skipif(skip_reason() is not None, reason=str(skip_reason()))]


@pytest.mark.timeout(240)
def test_new_controller_takes_over_and_finishes_pending_work(tmp_path: Path) -> None:
    with ProcessCluster(tmp_path, 3) as cluster:
        cluster.admin_call(lambda a: a.create_topic("old", 3, 2))
        cluster.wait_for(lambda: cluster.state("old", 2) is not None, 30.0, "topic old created")
        old_controller = cluster.controller()
        old_epoch = cluster.controller_epoch()
        cluster.kill(old_controller)
        # Pending work, written while the dead controller's ephemeral node still exists.
        cluster.admin_call(lambda a: a.delete_topic("old"))
        cluster.admin_call(lambda a: a.create_topic("new", 2, 2, assignment={0: (1, 2), 1: (2, 3)}))
        cluster.wait_for(lambda: cluster.controller() not in (-1, old_controller), 60.0, "a new controller")
        assert cluster.controller_epoch() > old_epoch
        cluster.wait_for(lambda: "old" not in cluster.zk_children(zk.TOPICS), 30.0, "topic old deleted")
        assert cluster.zk_children(zk.DELETE_TOPICS) == []
        cluster.wait_for(lambda: all(cluster.state("new", p) is not None for p in (0, 1)), 30.0, "topic new created")
        for p in (0, 1):
            state = cluster.state("new", p)
            assert state is not None and state.leader != old_controller and state.leader != -1
        events = [e for b in (1, 2, 3) for e in cluster.events(b) if e["kind"] == "controller_elected"]
        assert sorted(e["controller_epoch"] for e in events) == list(range(1, len(events) + 1))
