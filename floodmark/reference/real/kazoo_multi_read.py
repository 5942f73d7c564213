"""Bulk ZooKeeper requests in kazoo's request shape: multiRead, which kazoo lacks, and multis
built without kazoo's per-operation overhead.

ZooKeeper 3.6 added ``multiRead`` (opcode 22): many reads in one request and one reply. A
controller taking over re-reads every partition's state node; with plain ``get`` calls that
is one round trip (and, in kazoo, one wake-up of its connection thread) per partition, with
``multiRead`` a few hundred partitions per round trip. kazoo sends any object that has a
``type``, ``serialize()`` and ``deserialize()``, so :class:`MultiRead` is just that.

Wire format, as for ``multi``: a MultiHeader (type, done, err) before each operation and a
final one with ``done`` set. Unlike ``multi``, each read succeeds or fails on its own: the
reply holds, per path, a GetDataResponse (data, stat) or an ErrorResponse (error code).

A new controller also writes 10,000 state nodes in multis of 500 operations. kazoo's
transaction object checks, normalises (against its chroot) and logs each operation as it is
added, which cost more than the writes' round trips. :func:`plain_transaction` builds the same
request (kazoo's own ``Transaction`` of ``SetData``/``CheckVersion``/``Delete``, the same
paths) directly for the operations whose results carry no path, from paths the runtime has
already validated.
"""

from __future__ import annotations

from typing import Any

from kazoo import exceptions as kz
from kazoo.protocol.serialization import (
    CheckVersion,
    Delete,
    GetData,
    SetData,
    Transaction,
    int_struct,
    multiheader_struct,
    read_buffer,
    stat_struct,
    write_string,
)
from kazoo.protocol.states import ZnodeStat

from floodmark.reference.runtime import CheckOp, DeleteOp, SetDataOp, TxnOp

# Paths per multiRead: a state node and its stat are ~200 bytes, so a reply stays far below
# ZooKeeper's 1 MB packet limit (jute.maxbuffer) while a 10,000-node read takes 20 round trips.
MULTI_READ_PATHS = 500


class MultiRead:
    """A multiRead of getData operations (without watches) on ``paths``.

    Its reply is, per path, ``(data, ZnodeStat)`` or the kazoo exception of that read.
    """

    type = 22  # ZooKeeper's OpCode.multiRead

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths

    def serialize(self) -> bytearray:
        b = bytearray()
        for path in self.paths:
            b.extend(multiheader_struct.pack(GetData.type, False, -1))
            b.extend(write_string(path))
            b.append(0)  # no watch
        b.extend(multiheader_struct.pack(-1, True, -1))
        return b

    @classmethod
    def deserialize(cls, buffer: bytes, offset: int) -> list[Any]:
        results: list[Any] = []
        while True:
            op_type, done, _ = multiheader_struct.unpack_from(buffer, offset)
            offset += multiheader_struct.size
            if done:
                return results
            if op_type == GetData.type:
                data, offset = read_buffer(buffer, offset)
                results.append((data, ZnodeStat._make(stat_struct.unpack_from(buffer, offset))))
                offset += stat_struct.size
            elif op_type == -1:  # this read failed: its error code follows
                code = int_struct.unpack_from(buffer, offset)[0]
                offset += int_struct.size
                results.append(kz.EXCEPTIONS[code]())
            else:
                raise ValueError(f"unexpected operation type {op_type} in a multiRead reply")

    def __repr__(self) -> str:  # kazoo logs requests at debug level
        return f"MultiRead({len(self.paths)} paths)"


def plain_transaction(ops: list[TxnOp], chroot: str | None) -> Transaction | None:
    """The request kazoo's transaction would send for ``ops``, if they are all set-data,
    check or delete operations on validated paths (kazoo's path normalisation changes none
    of them: no empty, ``.`` or ``..`` component); None for anything else."""
    root = chroot or ""
    built: list[Any] = []
    for op in ops:
        if op.path == "/" or "/." in op.path:
            return None  # what kazoo makes of these is left to kazoo
        path = root + op.path
        if type(op) is SetDataOp and type(op.data) is bytes and type(op.version) is int:
            built.append(SetData(path, op.data, op.version))
        elif type(op) is CheckOp and type(op.version) is int:
            built.append(CheckVersion(path, op.version))
        elif type(op) is DeleteOp and type(op.version) is int:
            built.append(Delete(path, op.version))
        else:
            return None
    return Transaction(built)
