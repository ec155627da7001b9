"""The build's worker process (index/worker.py): real forks, real pipes."""

from __future__ import annotations

import os
import signal
import time

import pytest

from gputalks.index.worker import Returning, WorkerDied, WorkerTraceback, can_fork, run_beside

pytestmark = pytest.mark.skipif(not can_fork(), reason="no fork or a single CPU: the build runs in-process")


def numbered(report):
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
    def failing(report):
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

    def failing(report):
        raise Local("the reason")
        yield

    with pytest.raises(RuntimeError, match="^Local: the reason$"):
        list(run_beside(failing, print, batch=1))


def test_a_killed_worker_is_reported_not_waited_for_forever():
    def slow(report):
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
    def endless(report):
        n = 0
        while True:
            yield os.getpid(), n
            n += 1

    stream = run_beside(endless, print, batch=10)
    pid, _ = next(stream)
    assert alive(pid)
    stream.close()  # what an exception or Ctrl-C in the consumer does
    assert not alive(pid)


def test_the_worker_writes_through_streams_of_its_own(capfd):
    """A warning printed in the worker reaches the terminal, through stdout and stderr objects
    the worker made (the inherited ones' locks may have been held by the spinner's thread)."""
    import sys

    def noisy(report):
        print("a warning from the worker", file=sys.stderr)
        yield id(sys.stdout), id(sys.stderr)

    [(worker_stdout, worker_stderr)] = list(run_beside(noisy, print, batch=1))
    assert (worker_stdout, worker_stderr) != (id(sys.stdout), id(sys.stderr))
    assert "a warning from the worker" in capfd.readouterr().err


def test_a_silent_worker_is_stopped_not_waited_for_forever():
    def stuck(report):
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
