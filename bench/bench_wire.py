"""Request/response round trips per second over loopback TCP (floodmark.reference.real.transport).

The broker's throughput target (>= 10,000 acknowledged records/s with acks=all, rf=3) rests
on the transport not being the bottleneck. This starts a server process answering
ProduceRequests, then measures from a client process:

* sequential: one request in flight at a time (latency-bound, like one follower fetch loop);
* pipelined: many requests in flight on the one connection (like many producers).

Each figure is the median of several runs. Next to the wall-clock rate it prints the CPU
time the client and the server spent per round trip (from /proc), and the rate that CPU
cost allows: on a shared, loaded machine the wall-clock rate measures the neighbours too,
the CPU cost does not. Usage: python bench/bench_wire.py [--runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "fixtures"))  # the test support
from zookeeper_server import free_port  # noqa: E402

from floodmark.reference.protocol import messages as m
from floodmark.reference.real.transport import TcpNetwork

log = logging.getLogger("bench")


def serve(address: str, ready: Any) -> None:
    async def handler(sender: str, message: Any) -> Any:
        return m.ProduceResponse(None, base_offset=len(message.values), high_watermark=1)

    async def main() -> None:
        network = TcpNetwork(address, log)
        await network.serve(handler)
        ready.set()
        await asyncio.Event().wait()

    asyncio.run(main())


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def measure(address: str, requests: int, in_flight: int, values: int) -> float:
    client = TcpNetwork(None, log)
    message = m.ProduceRequest("t0", 0, tuple(f"0-{i}" for i in range(values)))
    await client.request(address, message, 5.0)  # connect outside the timing
    sent = 0

    async def worker() -> None:
        nonlocal sent
        while sent < requests:
            sent += 1
            await client.request(address, message, 10.0)

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(in_flight)))
    elapsed = time.perf_counter() - start
    await client.close()
    return requests / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--requests", type=int, default=20000)
    args = parser.parse_args()
    address = f"127.0.0.1:{free_port()}"
    ready = multiprocessing.Event()
    server = multiprocessing.Process(target=serve, args=(address, ready), daemon=True)
    server.start()
    try:
        ready.wait(10)
        print(f"loopback round trips per second, median of {args.runs} runs of {args.requests} requests")
        assert server.pid is not None
        for label, in_flight, values in [("sequential, 1 in flight, 1 record", 1, 1),
                                         ("pipelined, 64 in flight, 1 record", 64, 1),
                                         ("pipelined, 64 in flight, 100 records", 64, 100)]:
            rates, client_cpu, server_cpu = [], [], []
            for _ in range(args.runs):
                c0, s0 = cpu_seconds(os.getpid()), cpu_seconds(server.pid)
                rates.append(asyncio.run(measure(address, args.requests, in_flight, values)))
                client_cpu.append((cpu_seconds(os.getpid()) - c0) / args.requests)
                server_cpu.append((cpu_seconds(server.pid) - s0) / args.requests)
            client_us, server_us = statistics.median(client_cpu) * 1e6, statistics.median(server_cpu) * 1e6
            print(f"  {label:38s} {statistics.median(rates):8,.0f} req/s wall "
                  f"(min {min(rates):,.0f}, max {max(rates):,.0f}); CPU per round trip: "
                  f"client {client_us:.0f} us, server {server_us:.0f} us "
                  f"-> {1e6 / max(client_us, server_us, 1e-3):,.0f} req/s CPU-bound")
    finally:
        server.terminate()
        server.join(5)


if __name__ == "__main__":
    main()
