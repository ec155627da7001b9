"""`python -m gputalks`: the `gputalks` command."""

from gputalks.cli import cli

cli()
