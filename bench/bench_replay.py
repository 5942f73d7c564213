"""Exact replay: the same seed gives byte-identical runs, whatever PYTHONHASHSEED is.

For each seed the swarm test that ``floodmark explore`` would draw (capped in length, so the
bench stays affordable) runs twice, in two fresh processes with two different hash seeds
(``PYTHONHASHSEED``): string hashing, and so the iteration order of any set or dict of
strings, differs between them. The digests of the history and node events (``digest.json``)
must be equal. Target: 100 seeds, 0 differences.

    python bench/bench_replay.py [--seeds 100] [--first 1] [--time-limit 20] [--jobs 2]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibration import machine_speed  # noqa: E402

ONE_RUN = """
import io, sys
from floodmark.run.swarm import swarm_config
from floodmark.run.runner import Runner
config = swarm_config(int(sys.argv[1]))
config = config.replace(time_limit=min(config.time_limit, float(sys.argv[3])))
runner = Runner(config, sys.argv[2], out=io.StringIO(), check=False)
runner.run()
print(runner.outcome.digest["run"] if runner.outcome.digest else "no digest")
"""


def digest_of(seed: int, hash_seed: str, store: str, time_limit: float) -> str:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    done = subprocess.run([sys.executable, "-c", ONE_RUN, str(seed), store, str(time_limit)],
                          capture_output=True, text=True, env=env, timeout=1800)
    if done.returncode != 0:
        return f"failed: {done.stderr.strip().splitlines()[-1] if done.stderr.strip() else done.returncode}"
    return done.stdout.strip().splitlines()[-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=100)
    parser.add_argument("--first", type=int, default=1)
    parser.add_argument("--time-limit", type=float, default=20.0, help="cap on each test's length (s)")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    seeds = list(range(args.first, args.first + args.seeds))
    started = time.monotonic()
    differ: list[int] = []
    with tempfile.TemporaryDirectory(prefix="floodmark-replay-") as store, ThreadPoolExecutor(args.jobs) as pool:
        def twice(seed: int) -> tuple[int, str, str]:
            return seed, digest_of(seed, "1", store, args.time_limit), digest_of(seed, "2", store, args.time_limit)

        for seed, first, second in pool.map(twice, seeds):
            same = first == second and not first.startswith(("failed", "no digest"))
            if not same:
                differ.append(seed)
            print(f"seed {seed}: {'identical' if same else 'DIFFERENT'} {first[:16]} {second[:16]}", flush=True)
    elapsed = time.monotonic() - started
    print(f"\nreplay: {len(seeds) - len(differ)}/{len(seeds)} seeds byte-identical under PYTHONHASHSEED 1 and 2 "
          f"(tests capped at {args.time_limit:.0f} s; {elapsed:.0f} s wall, {args.jobs} jobs, "
          f"load {os.getloadavg()[0]:.1f}, machine speed {machine_speed():.2f})")
    print(f"target: 100 seeds, 0 differences: {'met' if not differ and len(seeds) >= 100 else 'not met'}"
          + (f"; different: {differ}" if differ else ""))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
