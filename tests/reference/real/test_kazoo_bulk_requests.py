"""Bulk requests in kazoo's shape (floodmark.reference.real.kazoo_multi_read): a multi built
directly is the request kazoo's own transaction object would have sent."""

from __future__ import annotations

import pytest
from kazoo.client import KazooClient

from floodmark.reference.real.kazoo_multi_read import plain_transaction
from floodmark.reference.runtime import CheckOp, CreateOp, DeleteOp, SetDataOp, TxnOp

OPS: list[TxnOp] = [CheckOp("/controller_epoch", 4), SetDataOp("/brokers/topics/t/partitions/0/state", b"{}", 3),
                    SetDataOp("/brokers/topics/t/partitions/1/state", b"{}"), DeleteOp("/admin/x", 2)]


@pytest.mark.parametrize("hosts", ["127.0.0.1:1", "127.0.0.1:1/floodmark/run"])
def test_a_plain_multi_is_what_kazoo_would_send(hosts: str) -> None:
    client = KazooClient(hosts=hosts)  # never started: only its chroot and transaction object are used
    transaction = client.transaction()
    transaction.check("/controller_epoch", 4)
    transaction.set_data("/brokers/topics/t/partitions/0/state", b"{}", 3)
    transaction.set_data("/brokers/topics/t/partitions/1/state", b"{}")
    transaction.delete("/admin/x", 2)
    built = plain_transaction(OPS, client.chroot)
    assert built is not None
    assert built.operations == transaction.operations
    assert built.serialize() == type(built)(transaction.operations).serialize()


@pytest.mark.parametrize("ops", [[CreateOp("/a", b"")], [SetDataOp("/a/./b", b"")], [DeleteOp("/")]])
def test_anything_else_is_left_to_kazoo(ops: list[TxnOp]) -> None:
    assert plain_transaction([*OPS, *ops], None) is None
