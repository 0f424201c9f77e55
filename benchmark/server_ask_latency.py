"""How long `caap ask` takes against a running `caap serve`, against a cold `caap ask`.

Starts `caap serve` on a free port of 127.0.0.1 with a throwaway data folder, stores the demo
persona's memories through the HTTP API, then times `caap ask --server URL` as a new process
for each of the persona's queries, several rounds; and, once, `caap ask` without a server (it
loads torch and the model itself). Wall-clock times of whole processes, as a user sees them.

    python benchmark/server_ask_latency.py [--rounds 3] [--no-cold]

A benchmark, not a test: the numbers depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _timed(cmd: list[str], env: dict[str, str]) -> float:
    t = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    took = time.perf_counter() - t
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds over the demo queries")
    parser.add_argument("--no-cold", action="store_true", help="skip the cold `caap ask`")
    args = parser.parse_args()

    sys.path.insert(0, str(ROOT))
    from caap.client import Client, ServerError

    persona = json.loads(
        (resources.files("caap") / "data" / "demo_persona.json").read_text(encoding="utf-8")
    )
    user = persona["user_id"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    caap = [sys.executable, "-m", "caap.cli"]
    with tempfile.TemporaryDirectory(prefix="caap-bench-") as tmp:
        port = _free_port()
        url = f"http://127.0.0.1:{port}"
        t0 = time.perf_counter()
        server = subprocess.Popen(
            [*caap, "serve", "--data", f"{tmp}/served", "--port", str(port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            client = Client(url, timeout=60)
            while True:
                try:
                    client.health()
                    break
                except ServerError:
                    if server.poll() is not None:
                        raise SystemExit("caap serve exited before answering") from None
                    time.sleep(0.2)
            started = time.perf_counter() - t0
            for m in persona["memories"]:
                client.remember(user_id=user, **m)
            client_env = {**env, "CAAP_SERVER": url}
            times: list[float] = []
            bare: list[float] = []
            trips: list[float] = []
            for _ in range(args.rounds):
                for q in persona["queries"]:
                    times.append(_timed([*caap, "ask", q, "--user", user], client_env))
                    # Where the time goes: a bare interpreter start, and the HTTP round trip
                    # (the server's respond) from this process.
                    bare.append(_timed([sys.executable, "-c", "pass"], env))
                    t = time.perf_counter()
                    client.respond(q, user)
                    trips.append(time.perf_counter() - t)
            cold = None
            if not args.no_cold:
                data = f"{tmp}/cold"
                _timed(
                    [
                        *caap,
                        "remember",
                        persona["memories"][0]["text"],
                        "--user",
                        user,
                        "--data",
                        data,
                    ],
                    env,
                )
                cold = _timed(
                    [*caap, "ask", persona["queries"][0], "--user", user, "--data", data], env
                )
        finally:
            server.terminate()
            server.wait(60)
    first, rest = times[0], times[1:]
    print(f"caap serve ready after {started:.1f} s (model loaded once)")
    print(f"caap ask --server: first call {first:.2f} s")
    if rest:
        print(
            f"caap ask --server: next {len(rest)} calls median {statistics.median(rest):.2f} s, "
            f"max {max(rest):.2f} s"
        )
    print(
        f"  of which: bare `python -c pass` median {statistics.median(bare):.2f} s; "
        f"HTTP respond round trip median {statistics.median(trips):.3f} s"
    )
    print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    if cold is not None:
        print(f"caap ask without a server (loads torch and the model): {cold:.2f} s")


if __name__ == "__main__":
    main()
