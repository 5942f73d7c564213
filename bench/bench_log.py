"""Benchmark: PartitionLog append and read throughput on real files and on SimDisk.

Prints records/s, the median of 5 runs, for:
  * leader appends in batches of 100 records and one record at a time (no fsync, as Kafka);
  * one fsync'd batch of 100 (``flush`` after each append: the worst case for durability);
  * sequential reads of 1,000 records per call across the whole log;
  * recovery: opening (scanning and CRC-checking) the whole log.

    python bench/bench_log.py [--records N]
"""

from __future__ import annotations

import argparse
import functools
import statistics
import tempfile
import time
from collections.abc import Callable

from floodmark.reference.log.partition_log import PartitionLog
from floodmark.reference.real.files import FileStorage
from floodmark.reference.runtime import Storage
from floodmark.reference.sim.disk import SimDisk

RUNS = 5
VALUE = "x" * 64  # a workload value is a short string such as "3-17"; 64 bytes is generous


def timed(action: Callable[[], int]) -> float:
    """Records per second of one run of ``action`` (which returns how many records it did)."""
    start = time.perf_counter()
    count = action()
    return count / (time.perf_counter() - start)


def median_rate(make_storage: Callable[[], tuple[Storage, str]], scenario: Callable[[Storage, str], int]) -> float:
    rates = []
    for _ in range(RUNS):
        storage, root = make_storage()
        rates.append(timed(functools.partial(scenario, storage, root)))
    return statistics.median(rates)


def appends(batch: int, total: int, flush: bool = False) -> Callable[[Storage, str], int]:
    def run(storage: Storage, root: str) -> int:
        log = PartitionLog.open(storage, f"{root}/t-0", segment_records=50_000)
        values = [VALUE] * batch
        for _ in range(total // batch):
            log.append_as_leader(values, 1)
            if flush:
                log.flush()
        log.close()
        return total // batch * batch
    return run


def reads(log: PartitionLog, storage: Storage, root: str) -> int:
    offset, count = log.log_start, 0
    while offset < log.log_end:
        records = log.read(offset, 1000)
        offset += len(records)
        count += len(records)
    return count


def recovery(log: PartitionLog, storage: Storage, root: str) -> int:
    log.close()
    reopened = PartitionLog.open(storage, f"{root}/t-0", segment_records=50_000)
    return reopened.log_end


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000, help="records per append/read run")
    args = parser.parse_args()
    total = args.records
    temporary = tempfile.TemporaryDirectory(prefix="floodmark-bench-")
    counter = iter(range(10**9))

    def files() -> tuple[Storage, str]:
        return FileStorage(), f"{temporary.name}/run{next(counter)}"

    def sim() -> tuple[Storage, str]:
        disk = SimDisk()
        disk.make_dirs("/data")
        return disk, "/data"

    print(f"PartitionLog throughput, records/s, median of {RUNS} runs, {len(VALUE)}-byte values")
    with temporary:
        for name, make in (("FileStorage", files), ("SimDisk", sim)):
            rows = {
                "append, batches of 100": median_rate(make, appends(100, total)),
                "append, 1 record per call": median_rate(make, appends(1, total // 10)),
                "append 100 + fsync each": median_rate(make, appends(100, min(total, 20_000), flush=True)),
            }
            for label, scenario in (("read, 1000 per call", reads), ("recovery on open", recovery)):
                rates = []
                for _ in range(RUNS):
                    storage, root = make()
                    appends(100, total)(storage, root)
                    log = PartitionLog.open(storage, f"{root}/t-0", segment_records=50_000)
                    rates.append(timed(functools.partial(scenario, log, storage, root)))
                rows[label] = statistics.median(rates)
            for label, rate in rows.items():
                print(f"  {name:<12} {label:<28} {rate:>12,.0f}")


if __name__ == "__main__":
    main()
