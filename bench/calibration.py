"""A fixed unit of CPU work, so figures measured on a busy machine can be scaled.

Benchmarks print ``machine_speed()`` beside their figures: about 0.3 s on an idle 3 GHz core
with CPython 3.11; twice that means the figures beside it are about twice too slow.
"""

from __future__ import annotations

import time


def machine_speed() -> float:
    """CPU seconds for 10^7 pure-Python additions."""
    started = time.process_time()
    total = 0
    for i in range(10_000_000):
        total += i
    return time.process_time() - started
