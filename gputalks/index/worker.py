"""The second core: a generator run in a forked process while this one consumes what it yields.

A build makes talks (parse, link, merge: Python, which one process runs on one core) and
writes them (SQLite). In one process they take turns; with the making forked off, the
writing of one batch overlaps the merging of the next, and while the worker parses most
sources this process parses the smallest and hands its items over. At 100,000 talks:
parsing 1.5 s (both processes), linking 1.4 s, then merging beside writing 3.8 s, then
2.7 s of indexing, while the worker ranks the related talks (3 s; a FLUSH sends the last
talks at once).

The worker uses nothing it inherited but memory: it opens its own database connections
(SQLite's rule: a connection does not cross a fork), says what it is doing through the pipe
and writes (warnings, say) through stdout and stderr objects of its own (another thread, the
progress spinner, may have held the inherited ones' locks at the fork), and leaves with
`os._exit`, so no inherited connection is closed, no `finally` of the parent's runs and no
buffer is flushed twice. Where there is no fork (Windows) or a single CPU, the generator
runs in-process.
"""

from __future__ import annotations

import ctypes
import os
import pickle
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from functools import cache
from multiprocessing.connection import Connection, Pipe
from typing import Any, Generic, TextIO, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")
Report = Callable[[str], None]
# A producer: given where to say what it is doing and where to receive what the consuming
# process hands over (`run_beside`'s `handed`), yields items and returns its result.
Producer = Callable[[Report, Callable[[], Any]], Generator[Item, None, Result]]
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
# The longest a worker may go without a message. A build's longest silence is parsing and
# linking before its first batch: about 10 s at 300,000 talks on 2 cores.
SILENCE_LIMIT = 15 * 60.0


# Yielded by a producer: send the items yielded so far now, not once a batch is full (the
# consumer has work to do with them while the producer goes on). Never reaches the consumer.
FLUSH = object()


class WorkerDied(RuntimeError):
    """The worker ended without finishing (killed, out of memory), or stopped answering."""


class WorkerTraceback(Exception):
    """Where in the worker an exception was raised (its `__cause__` in this process)."""


@dataclass(frozen=True)
class _Message:
    kind: str  # "items", "report", "done" or "error"
    payload: Any


class Returning(Generic[Item, Result]):
    """A generator to iterate (once: a consumer may stop and later go on) that keeps what it
    returns, in `value`, for a consumer that only iterates."""

    def __init__(self, generator: Generator[Item, None, Result]):
        self.generator = generator
        self.value: Result | None = None

    def __iter__(self) -> Iterator[Item]:
        return self

    def __next__(self) -> Item:
        try:
            return next(self.generator)
        except StopIteration as done:
            self.value = done.value
            raise StopIteration from None

    def close(self) -> None:
        self.generator.close()


def can_fork() -> bool:
    """Fork exists and this process may use more than one CPU."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return hasattr(os, "fork") and cpus > 1


_STOPS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}


def _nothing() -> None:
    return None


def run_beside(produce: Producer, report: Report, batch: int, forked: bool | None = None,
               silence_limit: float = SILENCE_LIMIT, handed: Callable[[], Any] = _nothing
               ) -> Generator[Item, None, Result]:
    """What `produce(report, received)` yields, made in a process forked at once (by default
    where `can_fork()`; this process goes on with what it has to prepare), `batch` items to a
    message, as a generator that returns what it returns. Its exceptions are raised there;
    closing it (or letting go of it), read or not, stops the worker. `report` is called in
    this process.

    `handed()` is work this process does once the generator is read, while the worker works
    on its own: the producer's `received()` returns its result, sent through a pipe
    (in-process, `received()` calls it).

    Where the fork fails (no memory or processes to spare), it runs in-process. A worker
    silent for `silence_limit` seconds is stopped (WorkerDied): a nightly run must end, not hang."""
    started = _start(produce, batch) if (can_fork() if forked is None else forked) else None
    received = _received(started, produce, report, silence_limit, handed)
    next(received)  # to its first `yield`: from here on, closing it stops the worker
    return received


def _received(started: tuple[Connection, Connection, _Worker] | None, produce: Producer, report: Report,
              silence_limit: float, handed: Callable[[], Any]) -> Generator[Item, None, Result]:
    """`run_beside`'s generator; its first item (None) only marks it started."""
    if started is None:
        yield None  # type: ignore[misc]
        return (yield from _without_flushes(produce(report, cache(handed))))
    receiving, handing, worker = started
    sender = None
    try:
        yield None  # type: ignore[misc]
        sender = _hand_over(handing, handed())
        while True:
            if not receiving.poll(silence_limit):
                raise WorkerDied(f"the build's worker process sent nothing for {silence_limit:g} s; stopped it")
            try:
                message: _Message = receiving.recv()
            except EOFError:
                raise WorkerDied(f"the build's worker process ended unexpectedly ({worker.wait()})") from None
            if message.kind == "items":
                yield from message.payload
            elif message.kind == "report":
                report(message.payload)
            elif message.kind == "error":
                error, where = message.payload
                raise error from WorkerTraceback(where)
            else:
                worker.wait()
                return message.payload
    finally:
        receiving.close()
        worker.stop()  # a send still waiting then fails, and its thread ends
        if sender is None:
            handing.close()
        else:
            sender.join()


def _without_flushes(items: Generator[Item, None, Result]) -> Generator[Item, None, Result]:
    """A producer's items in its consumer's process, where there is nothing to flush."""
    try:
        while True:
            try:
                item = next(items)
            except StopIteration as done:
                return done.value
            if item is not FLUSH:
                yield item
    finally:
        items.close()


def _hand_over(handing: Connection, value: Any) -> threading.Thread:
    """Send `value` to the worker from a thread: the worker may send items before it reads
    it, which this process must be free to receive (or each would wait for the other)."""
    def send() -> None:
        try:
            handing.send(value)
        except Exception:  # noqa: BLE001 (a worker gone, or a value that does not pickle: the
            pass           # worker's `received()` then fails, and the receiving loop says so)
        finally:
            handing.close()
    sender = threading.Thread(target=send, name="hand-over", daemon=True)
    sender.start()
    return sender


def _start(produce: Producer, batch: int) -> tuple[Connection, Connection, _Worker] | None:
    """Fork the worker; where it is heard from, where it is handed what this process makes
    for it, and the worker. None when the fork fails."""
    receiving, sending = Pipe(duplex=False)
    taking, handing = Pipe(duplex=False)
    parent = os.getpid()
    # Stop signals wait until the worker has its own handlers: a SIGTERM in between would run
    # this process's handler in the fork, and its exception would unwind this process's stack.
    held = signal.pthread_sigmask(signal.SIG_BLOCK, _STOPS)
    try:
        pid = os.fork()
    except OSError:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
        for end in (receiving, sending, taking, handing):
            end.close()
        return None
    if pid == 0:  # the worker
        code = 70
        try:
            receiving.close()
            handing.close()
            code = _work(produce, sending, taking, batch, parent, held)
        finally:
            os._exit(code)
    signal.pthread_sigmask(signal.SIG_SETMASK, held)
    sending.close()
    taking.close()
    return receiving, handing, _Worker(pid)


class _Worker:
    """The forked process, waited for exactly once."""

    def __init__(self, pid: int):
        self.pid, self.status = pid, None

    def wait(self) -> str:
        """How it ended."""
        if self.status is None:
            _, self.status = os.waitpid(self.pid, 0)
        if os.WIFSIGNALED(self.status):
            name = signal.Signals(os.WTERMSIG(self.status)).name
            return f"killed by {name}" + (", most likely out of memory" if name == "SIGKILL" else "")
        return f"exit code {os.WEXITSTATUS(self.status)}"

    def stop(self) -> None:
        if self.status is None:
            os.kill(self.pid, signal.SIGTERM)
            self.wait()


def _work(produce: Producer, sending: Connection, taking: Connection, batch: int, parent: int,
          held: set[signal.Signals]) -> int:
    """The worker's whole life; its exit code. It starts with stop signals blocked; `held` is
    the signal mask to restore once its own handlers are in place."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle: it stops us
    for stop in (signal.SIGTERM, signal.SIGHUP):  # not the parent's handlers: a worker just ends
        signal.signal(stop, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, held)
    _end_with_parent(parent)
    sys.stdout, sys.stderr = _own_stream(sys.stdout, 1), _own_stream(sys.stderr, 2)
    try:
        items = produce(lambda message: sending.send(_Message("report", message)), cache(taking.recv))
        chunk: list[Any] = []
        while True:
            try:
                item = next(items)
            except StopIteration as done:
                result = done.value
                break
            if item is not FLUSH:
                chunk.append(item)
            if chunk and (len(chunk) == batch or item is FLUSH):
                sending.send(_Message("items", chunk))
                chunk = []
        if chunk:
            sending.send(_Message("items", chunk))
        sending.send(_Message("done", result))
        return 0
    except BrokenPipeError:  # the parent stopped listening
        return 1
    except BaseException as exc:  # noqa: BLE001 (every failure goes to the parent, which raises it)
        where = traceback.format_exc()
        try:
            pickle.dumps(exc)
        except Exception:  # noqa: BLE001 (an exception that does not pickle still says what it was)
            exc = RuntimeError(f"{type(exc).__name__}: {exc}")
        try:
            sending.send(_Message("error", (exc, where)))
        except OSError:
            pass
        return 1
    finally:
        for stream in (sys.stdout, sys.stderr):  # `os._exit` follows: nothing else flushes them
            try:
                stream.flush()
            except (OSError, ValueError):
                pass


def _own_stream(inherited: TextIO | None, fd: int) -> TextIO:
    """A text stream of the worker's own on the same descriptor (or nowhere, if it is closed)."""
    encoding = getattr(inherited, "encoding", None) or "utf-8"
    try:
        return open(fd, "w", encoding=encoding, errors="backslashreplace", buffering=1, closefd=False)
    except OSError:
        return open(os.devnull, "w", encoding=encoding)


def _end_with_parent(parent: int) -> None:
    """Linux: the kernel ends the worker when its parent dies (killed, say), instead of
    leaving it to finish work nobody will read."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # it died before that took hold
            os._exit(1)
