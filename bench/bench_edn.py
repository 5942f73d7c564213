"""Reading Jepsen EDN histories: time and memory per megabyte of input.

    python bench/bench_edn.py [--ops 100000] [--repeat 3]

A correct CAS-register history of ``--ops`` entries (invocations plus completions, 10
processes: :mod:`floodmark.checkers.linearizability.synthetic`) is written as Jepsen writes
``history.edn`` (one op map per line, :func:`floodmark.formats.jepsen_edn.write_edn_history`)
and as Knossos's test data holds it (one vector of op maps), about 77 bytes per op. For
each shape, printed:

- ``parse``: the median process CPU time of reading the EDN forms alone
  (:func:`floodmark.formats.edn.iter_forms`), in seconds and seconds per MB;
- ``load``: the same for :func:`floodmark.formats.detect.load_history`, what ``floodmark
  check`` does before it checks (read the file, detect the format, parse, build the ops);
- ``peak``: how much the peak resident set of a fresh process grew while it loaded the
  history once (MiB, and MiB per MB of input), the figure that decides how large a history
  fits in memory.

Each time is printed beside the calibration anchor (:func:`calibration.machine_speed`,
measured right after it) and as a multiple of it, a load-independent figure.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from calibration import machine_speed

from floodmark.checkers.linearizability.synthetic import register_run
from floodmark.formats import edn
from floodmark.formats.detect import load_history
from floodmark.formats.jepsen_edn import write_edn_history

MB = 1e6
MIB = 2**20


def median_cpu(work: Callable[[], object], repeat: int) -> tuple[float, float]:
    """Median CPU seconds of ``work`` and the median anchor measured right after each run."""
    times, anchors = [], []
    for _ in range(repeat):
        started = time.process_time()
        work()
        times.append(time.process_time() - started)
        anchors.append(machine_speed())
    return statistics.median(times), statistics.median(anchors)


def peak_growth(path: Path) -> int:
    """Bytes the peak RSS of a fresh process grew by while it loaded ``path`` once."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[1]),
                                                       os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, __file__, "--child", str(path)], capture_output=True, text=True,
                          env=env, check=True)
    return int(done.stdout.split()[-1])


def peak_resident() -> int:
    """This process's peak resident set so far, in bytes. Not ``ru_maxrss``: Linux carries
    that across ``exec``, so a child would start with the parent's peak."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))


def child(path: str) -> None:
    before = peak_resident()
    ops = load_history(path).ops
    after = peak_resident()
    assert ops
    print(after - before)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", type=int, default=100_000, help="history entries (invocations plus completions)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return 0
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}, "
          f"reference loop {machine_speed():.2f} CPU s (about 0.3 s when idle)")
    history = register_run(1, ops=args.ops // 2, processes=10).history
    with tempfile.TemporaryDirectory() as directory:
        stream = Path(directory) / "history.edn"
        write_edn_history(stream, history)
        vector = Path(directory) / "vector.edn"
        vector.write_text("[" + stream.read_text(encoding="utf-8") + "]\n", encoding="utf-8")
        print(f"{len(history):,} ops; median of {args.repeat} runs, CPU s (x anchor: the time over the anchor)")
        print(f"{'shape':8} {'MB':>6} {'parse s':>8} {'s/MB':>6} {'x anchor':>8} {'load s':>8} {'s/MB':>6} "
              f"{'x anchor':>8} {'peak MiB':>9} {'MiB/MB':>7} {'anchor':>7}")
        for shape, path in (("stream", stream), ("vector", vector)):
            text = path.read_text(encoding="utf-8")
            size = len(text.encode()) / MB
            parse, anchor = median_cpu(lambda text=text: list(edn.iter_forms(text)), args.repeat)
            load, load_anchor = median_cpu(lambda path=path: load_history(path), args.repeat)
            peak = peak_growth(path) / MIB
            assert len(load_history(path).ops) == len(history)
            print(f"{shape:8} {size:6.2f} {parse:8.3f} {parse / size:6.3f} {parse / anchor:8.2f} {load:8.3f} "
                  f"{load / size:6.3f} {load / load_anchor:8.2f} {peak:9.0f} {peak / size:7.1f} {anchor:7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
