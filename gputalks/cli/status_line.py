"""One line of progress on a terminal's stderr, rewritten in place as a long job moves on; on
anything else (a log, a CI run) nothing but the notices, each on its own line."""

from __future__ import annotations

import shutil
import sys

import click

CLEAR = "\r\x1b[2K"  # back to the line's start, and erase it


class StatusLine:
    def __init__(self) -> None:
        self.live = sys.stderr.isatty()
        self.shown = False

    def update(self, message: str) -> None:
        if self.live:
            width = max(20, shutil.get_terminal_size().columns - 1)
            sys.stderr.write(CLEAR + message[:width])
            sys.stderr.flush()
            self.shown = True

    def clear(self) -> None:
        if self.shown:
            sys.stderr.write(CLEAR)
            sys.stderr.flush()
            self.shown = False

    def notice(self, message: str) -> None:
        """A line that stays (a warning, a deadline reached)."""
        self.clear()
        click.echo(message, err=True)
