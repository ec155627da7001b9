"""The build's worker process (index/worker.py): real forks, real pipes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import pytest

from gputalks.index.worker import FLUSH, Returning, WorkerDied, WorkerTraceback, can_fork, run_beside

from tests.conftest import wait_for

pytestmark = pytest.mark.skipif(not can_fork(), reason="no fork or a single CPU: the build runs in-process")


def numbered(report, received):
    """5,000 (pid, n) pairs, two reports, and a result."""
    report("starting")
    for n in range(5000):
        yield os.getpid(), n
    report("done making")
    return {"made": 5000}


def drain(stream):
    """(items, what the generator returned)."""
    returning = Returning(stream)
    return list(returning), returning.value


def threads_left() -> int:
    """Hand-over threads still running."""
    import threading
    return sum(t.name == "hand-over" for t in threading.enumerate())


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_worker_streams_items_in_order_and_returns_its_result():
    reports = []
    items, result = drain(run_beside(numbered, reports.append, batch=1000))
    assert [n for _, n in items] == list(range(5000))
    made_in = {pid for pid, _ in items}
    assert len(made_in) == 1 and made_in != {os.getpid()}  # made in another process
    assert not alive(made_in.pop())  # and it is gone, waited for
    assert result == {"made": 5000}
    assert reports == ["starting", "done making"]


def test_in_process_it_gives_the_same():
    reports = []
    items, result = drain(run_beside(numbered, reports.append, batch=1000, forked=False))
    assert items == [(os.getpid(), n) for n in range(5000)]
    assert result == {"made": 5000} and reports == ["starting", "done making"]


def test_a_worker_exception_is_raised_here_with_where_it_happened():
    def failing(report, received):
        yield 1
        raise ValueError("archived documents no longer parse: line 3")

    stream = run_beside(failing, print, batch=1)
    assert next(stream) == 1
    with pytest.raises(ValueError, match="no longer parse: line 3") as raised:
        next(stream)
    assert isinstance(raised.value.__cause__, WorkerTraceback)
    assert "in failing" in str(raised.value.__cause__)


def test_an_exception_that_does_not_pickle_still_says_what_it_was():
    class Local(Exception):  # a local class does not pickle
        pass

    def failing(report, received):
        raise Local("the reason")
        yield

    with pytest.raises(RuntimeError, match="^Local: the reason$"):
        list(run_beside(failing, print, batch=1))


def test_a_killed_worker_is_reported_not_waited_for_forever():
    def slow(report, received):
        yield os.getpid()
        time.sleep(60)
        yield 0

    stream = run_beside(slow, print, batch=1)
    pid = next(stream)
    os.kill(pid, signal.SIGKILL)
    started = time.monotonic()
    with pytest.raises(WorkerDied, match=r"ended unexpectedly \(killed by SIGKILL, most likely out of memory\)"):
        next(stream)
    assert time.monotonic() - started < 5
    assert not alive(pid)


def test_leaving_early_stops_the_worker():
    def endless(report, received):
        n = 0
        while True:
            yield os.getpid(), n
            n += 1

    stream = run_beside(endless, print, batch=10)
    pid, _ = next(stream)
    assert alive(pid)
    stream.close()  # what an exception or Ctrl-C in the consumer does
    assert not alive(pid)


def test_the_worker_starts_when_asked_for_and_stops_when_let_go_of_unread(tmp_path, started_children):
    """A build forks its worker before it copies the index, so parsing starts at once; a
    build that fails before reading it (a full disk at the copy) must not leave it behind."""
    started = tmp_path / "started"

    def marking(report, received):
        written = started.with_suffix(".partial")
        written.write_text(str(os.getpid()))
        written.replace(started)  # whole, or not there: never read half-written
        yield received()  # waits for this process, which reads nothing

    stream = run_beside(marking, print, batch=1)
    wait_for(started.exists, "the worker started")  # nothing read from it yet
    pid = int(started.read_text())
    assert pid != os.getpid() and [line.split(":")[0] for line in started_children()] == [str(pid)]
    stream.close()
    assert started_children() == [] and threads_left() == 0


def test_the_worker_writes_through_streams_of_its_own(capfd):
    """A warning printed in the worker reaches the terminal, through stdout and stderr objects
    the worker made (the inherited ones' locks may have been held by the spinner's thread)."""
    import sys

    def noisy(report, received):
        print("a warning from the worker", file=sys.stderr)
        yield id(sys.stdout), id(sys.stderr)

    [(worker_stdout, worker_stderr)] = list(run_beside(noisy, print, batch=1))
    assert (worker_stdout, worker_stderr) != (id(sys.stdout), id(sys.stderr))
    assert "a warning from the worker" in capfd.readouterr().err


def test_a_silent_worker_is_stopped_not_waited_for_forever():
    def stuck(report, received):
        yield os.getpid()
        time.sleep(60)  # a deadlock, say
        yield 0

    stream = run_beside(stuck, print, batch=1, silence_limit=0.5)
    pid = next(stream)
    started = time.monotonic()
    with pytest.raises(WorkerDied, match=r"sent nothing for 0.5 s; stopped it"):
        next(stream)
    assert time.monotonic() - started < 5
    assert not alive(pid)


def handed_sum(report, received):
    """Items made here, then those made from what the consuming process handed over."""
    yield os.getpid(), "own"
    pid, numbers = received()
    assert received() == (pid, numbers)  # made once, however often asked
    yield pid, sum(numbers)
    return "done"


def test_what_this_process_hands_over_reaches_the_worker():
    made_here = []

    def hand():
        made_here.append(os.getpid())
        return os.getpid(), list(range(1000))

    items, result = drain(run_beside(handed_sum, print, batch=1, handed=hand))
    assert made_here == [os.getpid()]  # the handed work ran in this process
    (worker, own), (handed_by, total) = items
    assert own == "own" and worker != os.getpid()
    assert (handed_by, total, result) == (os.getpid(), 499500, "done")


def test_in_process_the_handed_work_runs_when_asked_for():
    items, result = drain(run_beside(handed_sum, print, batch=1, forked=False, handed=lambda: (1, [2, 3])))
    assert items == [(os.getpid(), "own"), (1, 5)] and result == "done"


def test_a_worker_sending_many_items_before_it_reads_the_hand_over_does_not_hang():
    """The hand-over (8 MiB, beyond any pipe's buffer) goes out from a thread while this
    process takes the worker's items (also beyond the buffer): neither waits for the other."""
    def early(report, received):
        for n in range(200):
            yield "x" * 100_000
        yield len(received())

    items = list(run_beside(early, print, batch=10, handed=lambda: b"y" * (8 << 20), silence_limit=20))
    assert len(items) == 201 and items[-1] == 8 << 20


def test_a_failing_hand_over_stops_the_worker(started_children):
    def waiting(report, received):
        yield os.getpid()
        yield received()

    def hand():
        assert len(started_children()) == 1  # the worker is running
        raise ValueError("the archive is locked")

    with pytest.raises(ValueError, match="archive is locked"):
        list(run_beside(waiting, print, batch=1, handed=hand))
    assert started_children() == [] and threads_left() == 0


def flushed_then_waiting(read: Path, report, received):
    """Three items, FLUSH, then the last only once the consumer has read the three: a build's
    talks, then the ranking. Were the three held back (till a batch of 1,000 or the end), the
    consumer would never read them in time and the last item would say so."""
    yield from (1, 2, 3)
    yield FLUSH
    for _ in range(3000):
        if read.exists():
            yield 4
            return "ranked"
        time.sleep(0.01)
    yield "held back"
    return "ranked"


@pytest.mark.parametrize("forked", [True, False])
def test_flush_sends_what_was_yielded_at_once_and_never_reaches_the_consumer(forked, tmp_path):
    read = tmp_path / "read"
    stream = Returning(run_beside(partial(flushed_then_waiting, read), lambda message: None, batch=1000,
                                  forked=forked))
    items = iter(stream)
    first = [next(items) for _ in range(3)]
    read.touch()
    assert first == [1, 2, 3]
    assert list(items) == [4] and stream.value == "ranked"


STOPPED_AT_ONCE = """
import os, signal, sys
from gputalks.index.worker import run_beside

class Stopped(Exception):
    pass

def stop(signum, frame):
    raise Stopped(signum)

signal.signal(signal.SIGTERM, stop)  # as the CLI does: a stop unwinds this process's stack

def waiting(report, received):
    yield os.getpid()
    yield received()

def hand():
    raise ValueError("the archive is locked")

for _ in range(int(sys.argv[1])):
    try:
        list(run_beside(waiting, print, batch=1, handed=hand, forked=True))
    except ValueError:
        pass
print("done", os.getpid(), flush=True)
"""


def test_a_worker_stopped_as_it_starts_never_runs_its_parents_code(tmp_path):
    """The parent's stop (SIGTERM) can reach the fork before the worker has its own handlers;
    the parent's handler must not run there and unwind a copy of the parent's program."""
    script = tmp_path / "stopped_at_once.py"
    script.write_text(STOPPED_AT_ONCE)
    done = subprocess.run([sys.executable, str(script), "300"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Stopped" not in done.stderr
    assert len(done.stdout.splitlines()) == 1 and done.stdout.startswith("done ")  # one process got there
