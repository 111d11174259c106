"""A GET's latency measured from a process of its own (bench/live_turns.py's plain GET under load).

    python bench/_get_probe.py PORT PATH TOKEN --count 20   # 20 GETs one after another, then their times
    python bench/_get_probe.py PORT PATH TOKEN              # a GET every 50 ms until stdin closes

Prints the GETs' times in seconds, a JSON list, on stdout. A person's browser
is not a thread of the load's clients: measured in the bench's own process,
a GET waits for that process's GIL behind its 100 client threads and the
recorded model (a thread wanting the GIL waits up to `sys.getswitchinterval()`,
5 ms, each time it comes back from a socket), which is the bench's own cost,
not the service's. The standard library only, so the probe starts in a blink
and shares nothing with the bench.
"""

from __future__ import annotations

import argparse
import http.client
import json
import sys
import threading
import time


def get(port: int, path: str, token: str) -> float:
    """One `GET path` on a new connection to 127.0.0.1:`port`, its time in seconds; raises on a status other
    than 200."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    started = time.perf_counter()
    conn.request("GET", path, headers={"Authorization": f"Token {token}"})
    response = conn.getresponse()
    response.read()
    elapsed = time.perf_counter() - started
    conn.close()
    if response.status != 200:
        raise RuntimeError(f"GET {path}: {response.status}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    parser.add_argument("path")
    parser.add_argument("token")
    parser.add_argument("--count", type=int, help="GETs one after another (default: every 50 ms until stdin closes)")
    args = parser.parse_args()
    if args.count is not None:
        times = [get(args.port, args.path, args.token) for _ in range(args.count)]
    else:
        stop = threading.Event()

        def until_stdin_closes() -> None:
            sys.stdin.read()
            stop.set()

        threading.Thread(target=until_stdin_closes, daemon=True).start()
        times = []
        while not stop.is_set():
            times.append(get(args.port, args.path, args.token))
            stop.wait(0.05)
    print(json.dumps(times))


if __name__ == "__main__":
    main()
