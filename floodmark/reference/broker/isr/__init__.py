"""A leader's in-sync replica set: who is in it, and how a leader changes it.

The ISR decides when a record is committed (the HW advances only when every ISR member has
it) and who may lead next, so every change to it is a fencing question: a leader must not
grow or shrink an ISR it no longer owns. The rule for who may join lives with the replica
(``Partition.may_join_isr``); this package is the leader's side of a change:

* ``maintenance``: the leader's duties: drop followers that lag, propose back those that
  caught up;
* ``updates``: the legacy way, a conditional write of the partition's state node in
  ZooKeeper by the leader itself;
* ``change_requests``: the KIP-343 way, asking the controller, which alone writes ZooKeeper.
"""
