"""Where the forked build worker pays: a rebuild of the derived tables from the archive, with the
worker forked and in one process, in alternating pairs, at each size.

    .venv/bin/python -m bench.fork 150 1000 10000 100000 [--rounds 3]

Prints, per size, the median wall time of each way and their ratio (in-process / forked: above
1 the worker wins). gputalks forks from `FORK_FROM_ITEMS` items (index/build.py).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.generate import generate
from bench.run import REPO, empty_derived, write_project

ALWAYS, NEVER = 0, 10**12  # FORK_FROM_ITEMS for "always fork" and "never fork"


def gputalks(project: Path, fork_from: int | None, *args: str) -> float:
    """Wall seconds of one gputalks command in its own process, with FORK_FROM_ITEMS set."""
    setup = f"import gputalks.index.build as b; b.FORK_FROM_ITEMS = {fork_from}; " if fork_from is not None else ""
    code = (f"{setup}import runpy, sys; sys.argv = ['gputalks', '--project', {str(project)!r}, *{list(args)!r}]; "
            "runpy.run_module('gputalks', run_name='__main__')")
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    if done.returncode not in (0, 1):
        raise SystemExit(f"gputalks {' '.join(args)} failed ({done.returncode}): {done.stderr[-2000:]}")
    return time.perf_counter() - started


def measure(n: int, work: Path, rounds: int) -> dict:
    config, _ = generate(n, work / f"snapshot-{n}")
    db_path = work / f"talks-{n}.db"
    project = write_project(work, db_path, config)
    gputalks(project, None, "refresh", "--db", str(db_path), "--snapshot", str(work / f"snapshot-{n}"))
    times: dict[str, list[float]] = {"forked": [], "in_process": []}
    for _ in range(rounds):
        for way, fork_from in (("forked", ALWAYS), ("in_process", NEVER)):
            empty_derived(db_path)
            times[way].append(gputalks(project, fork_from, "rebuild", "--db", str(db_path)))
    forked, alone = statistics.median(times["forked"]), statistics.median(times["in_process"])
    return {"talks": n, "forked_s": round(forked, 2), "in_process_s": round(alone, 2),
            "in_process_over_forked": round(alone / forked, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sizes", nargs="+", type=int)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"{'talks':>8} {'forked s':>9} {'in-process s':>13} {'ratio':>6}")
    for n in args.sizes:
        with tempfile.TemporaryDirectory(prefix="gputalks-fork-") as work:
            row = measure(n, Path(work), args.rounds)
        print(f"{row['talks']:>8,} {row['forked_s']:>9} {row['in_process_s']:>13} {row['in_process_over_forked']:>6}",
              flush=True)


if __name__ == "__main__":
    main()
