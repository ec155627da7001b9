"""Writes docs/cli.md, the command reference, from the commands' own --help.

    .venv/bin/python docs/cli.py          # after changing a command's help
    .venv/bin/python docs/cli.py --check  # exit 1 if docs/cli.md is out of date (a test runs this)
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
from click.testing import CliRunner

from gputalks.cli import cli

REFERENCE = Path(__file__).with_name("cli.md")


def help_of(*names: str) -> str:
    result = CliRunner().invoke(cli, [*names, "--help"], terminal_width=88, prog_name="gputalks")
    return result.output.rstrip()


def reference() -> str:
    parts = ["# Command reference", "",
             "Generated from `--help` by `docs/cli.py`; a test keeps it in sync with the code.", "",
             "```", help_of(), "```"]
    for name in cli.list_commands(None):
        command = cli.get_command(None, name)
        parts += ["", f"## gputalks {name}", "", "```", help_of(name), "```"]
        if isinstance(command, click.Group):
            for sub in sorted(command.commands):
                parts += ["", f"### gputalks {name} {sub}", "", "```", help_of(name, sub), "```"]
    return "\n".join(parts) + "\n"


def main(argv: list[str]) -> int:
    text = reference()
    if "--check" in argv:
        if REFERENCE.read_text(encoding="utf-8") != text:
            print(f"{REFERENCE} is out of date: run python docs/cli.py", file=sys.stderr)
            return 1
        return 0
    REFERENCE.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
