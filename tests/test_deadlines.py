"""Deadlines that hold whatever a host does, as real `gputalks` processes: a host that sends its
headers a byte at a time, and a proxy that accepts yt-dlp's connection and never answers. The
source fails at its deadline, keeps its last good data, and the run ends within the deadline
+ 10 s with the lock released (the next refresh runs at once)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from tests.conftest import SNAPSHOT
from tests.faults import gputalks, inventory, sources_config


@pytest.fixture
def raw_host() -> Iterator[Callable[[Callable[[socket.socket, threading.Event], None]], int]]:
    """A TCP server on 127.0.0.1 whose every connection is handled by the given function."""
    stop = threading.Event()
    servers: list[socket.socket] = []

    def start(handle: Callable[[socket.socket, threading.Event], None]) -> int:
        server = socket.create_server(("127.0.0.1", 0))
        server.settimeout(0.2)
        servers.append(server)

        def accept() -> None:
            while not stop.is_set():
                try:
                    conn, _ = server.accept()
                except TimeoutError:
                    continue
                except OSError:
                    return
                threading.Thread(target=handle, args=(conn, stop), daemon=True).start()

        threading.Thread(target=accept, daemon=True).start()
        return server.getsockname()[1]

    yield start
    stop.set()
    for server in servers:
        server.close()


def headers_a_byte_at_a_time(conn: socket.socket, stop: threading.Event) -> None:
    with conn:
        conn.recv(65536)
        for byte in b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Padding: " + b"x" * 500:
            if stop.is_set():
                return
            try:
                conn.sendall(bytes([byte]))
            except OSError:
                return
            time.sleep(0.2)


def silent(conn: socket.socket, stop: threading.Event) -> None:
    with conn:
        stop.wait(60)


def refresh_fails_at_the_deadline(db_path, config, source: str) -> None:
    """One refresh of `source` with a 1 s deadline: exit 3 (its only source failed) with one line,
    within the deadline + 10 s, every talk kept."""
    before = inventory(db_path)
    started = time.monotonic()
    done = gputalks("refresh", "--db", str(db_path), "--config", str(config), "--source", source)
    took = time.monotonic() - started
    assert done.returncode == 3, done.stdout + done.stderr
    assert "deadline passed" in done.stderr and "Traceback" not in done.stderr
    assert took < 11, took
    assert inventory(db_path) == before


def test_a_host_that_trickles_its_headers_fails_its_source_at_the_deadline(fresh_db_path, tmp_path, raw_host):
    port = raw_host(headers_a_byte_at_a_time)
    config = sources_config(tmp_path, lambda t: t.replace(
        'repo = "gpu-mode/lectures"', f'repo = "gpu-mode/lectures"\napi = "http://127.0.0.1:{port}"'))
    config.write_text(config.read_text() + "source_deadline = 1\nrequest_timeout = 30\n")
    refresh_fails_at_the_deadline(fresh_db_path, config, "github")
    again = gputalks("refresh", "--db", str(fresh_db_path), "--snapshot", str(SNAPSHOT), "--source", "github")
    assert again.returncode == 0, again.stderr  # the lock was released


def test_a_hung_yt_dlp_extraction_fails_youtube_at_the_deadline(fresh_db_path, tmp_path, raw_host):
    port = raw_host(silent)
    config = sources_config(tmp_path)
    config.write_text(config.read_text() + "source_deadline = 1\nrequest_timeout = 60\n\n"
                      f'[youtube.ytdlp]\nproxy = "http://127.0.0.1:{port}"\nsocket_timeout = 60\n')
    refresh_fails_at_the_deadline(fresh_db_path, config, "youtube")
