"""The log: what a broker keeps on disk for each partition replica.

A partition's log (``partition_log``) is a sequence of CRC-checked segments (``segment``)
recovered on open; the leader epoch cache (``epoch_cache``, KIP-101) records which epoch
wrote which stretch; checkpoints (``checkpoint``) are small files rewritten whole; log
directories (``log_dirs``, KIP-112) place replicas on disks and take a failed one offline.
All of it goes through the runtime's ``Storage``.
"""

from floodmark.reference.log.log_dirs import LogDirOfflineError, LogDirs
from floodmark.reference.log.partition_log import LogAppendError, PartitionLog

__all__ = ["LogAppendError", "LogDirOfflineError", "LogDirs", "PartitionLog"]
