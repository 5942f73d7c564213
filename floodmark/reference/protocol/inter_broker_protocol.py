"""The inter-broker protocol version: which generation of the protocol a broker speaks.

KIP-343 changes what brokers say to each other and to the controller, so a cluster cannot
switch to it in one step: it is gated behind a per-broker setting, as Kafka gates protocol
changes behind ``inter.broker.protocol.version``. An upgrade is a "double roll" (restart
every broker with the new software at the old version, then again at the new one), so
during an upgrade brokers of different versions share a cluster. Four versions exist:

* ``legacy`` (before KIP-343): no heartbeats, no self-fencing; a leader writes ISR changes
  to ZooKeeper itself; the registration says version 4, and the controller treats such a
  broker as always active (it never heartbeats, so it can never be fenced for silence);
* ``heartbeats`` (the default, the behaviour this reference always had): heartbeats and
  self-fencing, ISR changes still written to ZooKeeper by the leader; the registration
  carries no version field (exactly as before the setting existed);
* ``kip-343``: heartbeats and self-fencing, and ISR changes sent to the controller as an
  ``IsrChangeRequest``, which validates and writes them; the registration says version 5;
* ``truncate-on-fetch``: as ``kip-343``, but a new follower no longer asks its leader where
  its epochs end (OffsetsForLeaderEpoch) before fetching: it fetches at once, each fetch
  naming the last epoch it holds, and truncates where the leader's answer says the logs
  diverge (Kafka 2.7, KAFKA-10554). The same safety by another path, so both are explored.

What each version means is decided here, in one place; the broker and the controller ask.
"""

from __future__ import annotations

from dataclasses import dataclass

LEGACY = "legacy"
HEARTBEATS = "heartbeats"
KIP_343 = "kip-343"
TRUNCATE_ON_FETCH = "truncate-on-fetch"
VERSIONS: tuple[str, ...] = (LEGACY, HEARTBEATS, KIP_343, TRUNCATE_ON_FETCH)
DEFAULT = HEARTBEATS

LEGACY_REGISTRATION_VERSION = 4
KIP_343_REGISTRATION_VERSION = 5


@dataclass(frozen=True)
class ProtocolFeatures:
    """What a broker speaking one inter-broker protocol version does."""

    version: str
    heartbeats: bool  # heartbeats the controller and fences itself when it cannot
    isr_changes_by_request: bool  # ISR changes go to the controller, not to ZooKeeper
    registration_version: int | None  # written into /brokers/ids/<id>; None: no field
    truncation_on_fetch: bool = False  # a follower truncates on its fetch's answer, not before


_FEATURES = {
    LEGACY: ProtocolFeatures(LEGACY, heartbeats=False, isr_changes_by_request=False,
                             registration_version=LEGACY_REGISTRATION_VERSION),
    HEARTBEATS: ProtocolFeatures(HEARTBEATS, heartbeats=True, isr_changes_by_request=False,
                                 registration_version=None),
    KIP_343: ProtocolFeatures(KIP_343, heartbeats=True, isr_changes_by_request=True,
                              registration_version=KIP_343_REGISTRATION_VERSION),
    TRUNCATE_ON_FETCH: ProtocolFeatures(TRUNCATE_ON_FETCH, heartbeats=True, isr_changes_by_request=True,
                                        registration_version=KIP_343_REGISTRATION_VERSION,
                                        truncation_on_fetch=True),
}


def features(version: str) -> ProtocolFeatures:
    """What ``version`` means; the error lists the valid versions."""
    try:
        return _FEATURES[version]
    except KeyError:
        raise ValueError(f"unknown inter-broker protocol version {version!r}; "
                         f"choose one of: {', '.join(VERSIONS)}") from None


def always_active(registration_version: int | None) -> bool:
    """Does the controller treat a broker registered at this version as active without
    heartbeats? Only a legacy (version 4) registration: its broker never heartbeats."""
    return registration_version == LEGACY_REGISTRATION_VERSION
