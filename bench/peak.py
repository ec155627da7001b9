"""Run one gputalks command and write its own peak memory to the file named by $GPUTALKS_PEAK_FILE.

    GPUTALKS_PEAK_FILE=peak.txt python -m bench.peak rebuild --db talks.db

The peak is the process's VmHWM (kB): the high-water mark of its own address space. The
rusage of a waited-for child (`os.wait4`) will not do: Linux counts in it the high-water mark
of the process that started it (a forked or vforked child carries it through `exec`), so
every command the benchmark ran after generating 300,000 talks "peaked" at the benchmark's
own 880 MiB.
"""

from __future__ import annotations

import atexit
import os
import runpy
import sys
from pathlib import Path

PEAK_FILE = "GPUTALKS_PEAK_FILE"


def own_peak_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc/self/status (Linux only)")


def main() -> None:
    target = Path(os.environ[PEAK_FILE])
    atexit.register(lambda: target.write_text(str(own_peak_kib())))
    sys.argv = ["gputalks", *sys.argv[1:]]
    runpy.run_module("gputalks.index.cli", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
