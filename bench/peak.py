"""Run one gputalks command and write its peak memory to the file named by $GPUTALKS_PEAK_FILE.

    GPUTALKS_PEAK_FILE=peak.txt python -m bench.peak rebuild --db talks.db

The peak is the process's VmHWM (kB), the high-water mark of its own address space, plus
the largest high-water mark of the processes it forked and waited for (a build's worker):
an upper bound of what they held together, as the pages they shared at the fork count in
both. The benchmark cannot read this from outside with `os.wait4`: Linux counts in that
rusage the high-water mark of the process that started the command (a forked or vforked
child carries it through `exec`), so every command run after generating 300,000 talks
"peaked" at the benchmark's own 880 MiB.
"""

from __future__ import annotations

import atexit
import os
import resource
import runpy
import sys
from pathlib import Path

PEAK_FILE = "GPUTALKS_PEAK_FILE"


def own_peak_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc/self/status (Linux only)")


def peak_with_workers_kib() -> int:
    return own_peak_kib() + resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # kB on Linux


def main() -> None:
    target = Path(os.environ[PEAK_FILE])
    atexit.register(lambda: target.write_text(str(peak_with_workers_kib())))
    sys.argv = ["gputalks", *sys.argv[1:]]
    runpy.run_module("gputalks", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
