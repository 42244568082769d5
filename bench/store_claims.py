#!/usr/bin/env python3
"""Claims against one PostgreSQL as the number of daemons grows (issue 14, docs/benchmarks.md).

N stand-in daemons (build/bench/store_claims_client: one process and one store connection
each, doing kagentd's store traffic per session: claim, trace path, trace records, variant
record and commit, finish, and a heartbeat every third of the lease; the fake evaluator and
the scripted model take --work-ms) work off one shared batch until the queue is empty. For
each N: claims per second over the run, claim latency (median, p99) and each session's other
store calls (median). N goes 1, 2, 5, 10, 25, 50, 75, 100 by default.

With --work-ms 0 (the default) every daemon claims back to back: the store's ceiling, which
is where this stops scaling. Real sessions last minutes, so a GPU host needs a claim every
tens of seconds; docs/benchmarks.md turns the ceiling into hosts per server.

The server is a throw-away one from tests/fixtures/postgres_server.py (this script runs
itself under it) unless KAGENT_TEST_POSTGRES_URL names one; the script empties that
database's public schema between rounds. Not a CI test.

Run: python3 bench/store_claims.py [--daemons 1,2,5,10,25,50,75,100] [--sessions-per-daemon 40]
     [--work-ms 0] [--client build/bench/store_claims_client]"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

SOURCE = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
SERVER = os.path.join(SOURCE, "tests", "fixtures", "postgres_server.py")


def percentile(values, fraction):
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


def reset(url):
    subprocess.run(["psql", url, "-q", "-c", "DROP SCHEMA public CASCADE; CREATE SCHEMA public"],
                   check=True, capture_output=True)


def round_of(client, url, daemons, sessions, work_ms):
    reset(url)
    subprocess.run([client, url, "create", str(sessions)], check=True, capture_output=True)
    # Every process connected and waiting before the first claim: start a little later.
    start = time.time() + 1.0 + daemons * 0.03
    processes = [subprocess.Popen([client, url, "run", f"{start:.6f}", str(work_ms)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(daemons)]
    results = []
    for process in processes:
        out, err = process.communicate(timeout=600)
        if process.returncode != 0:
            raise SystemExit(f"a client failed: {err}")
        results.append(json.loads(out))
    claims = [ms for r in results for ms in r["claim_ms"]]
    session_ms = [ms for r in results for ms in r["session_ms"]]
    first = min(r["first"] for r in results if r["claims"])
    last = max(r["last"] for r in results if r["claims"])
    total = sum(r["claims"] for r in results)
    if total != sessions:
        raise SystemExit(f"{total} claims for {sessions} sessions: a session claimed twice "
                         f"or never")
    busy = sum(1 for r in results if r["claims"])
    return {"daemons": daemons, "claims": total, "seconds": last - first,
            "claims_per_second": total / (last - first), "claim_median_ms":
            statistics.median(claims), "claim_p99_ms": percentile(claims, 0.99),
            "session_median_ms": statistics.median(session_ms), "daemons_that_claimed": busy}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--daemons", default="1,2,5,10,25,50,75,100")
    parser.add_argument("--sessions-per-daemon", type=int, default=40)
    parser.add_argument("--min-sessions", type=int, default=400)
    parser.add_argument("--work-ms", type=float, default=0)
    parser.add_argument("--client", default=os.path.join(SOURCE, "build", "bench",
                                                         "store_claims_client"))
    parser.add_argument("--json", help="also write the rows to this file")
    arguments = parser.parse_args()
    url = os.environ.get("KAGENT_TEST_POSTGRES_URL")
    counts = [int(n) for n in arguments.daemons.split(",")]
    if not url:
        # Under a server of our own, with room for every daemon's connection.
        return subprocess.run([sys.executable, SERVER, "--max-connections",
                               str(max(counts) * 2 + 20), "run", "--", sys.executable,
                               os.path.abspath(__file__), *sys.argv[1:]]).returncode
    rows = []
    print(f"# {os.cpu_count()} cores; work per session {arguments.work_ms:g} ms")
    print("| daemons | sessions | claims/s | claim median (ms) | claim p99 (ms) |"
          " other store calls per session, median (ms) |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for daemons in counts:
        sessions = max(arguments.min_sessions, daemons * arguments.sessions_per_daemon)
        row = round_of(arguments.client, url, daemons, sessions, arguments.work_ms)
        rows.append(row)
        print(f"| {daemons} | {sessions} | {row['claims_per_second']:.0f} |"
              f" {row['claim_median_ms']:.2f} | {row['claim_p99_ms']:.1f} |"
              f" {row['session_median_ms']:.2f} |", flush=True)
    if arguments.json:
        with open(arguments.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
