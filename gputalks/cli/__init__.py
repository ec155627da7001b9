"""The `gputalks` command: a thin Click layer over plain functions. Each command lives in the
module of its job (cli/build.py, reports.py, tables.py, search.py, site.py, project.py) and is
imported only when it runs (Click's lazily loaded subcommands), so `gputalks --version` and
the quick commands start without loading yt-dlp, httpx or Datasette.
"""

from __future__ import annotations

import importlib

import click

from gputalks import __version__
from gputalks.project import PROJECT_ENV

# Each command: the module and the name it is defined under.
COMMANDS = {
    "init": "gputalks.cli.project:init",
    "refresh": "gputalks.cli.build:refresh",
    "rebuild": "gputalks.cli.build:rebuild",
    "status": "gputalks.cli.reports:status",
    "changes": "gputalks.cli.reports:changes",
    "export": "gputalks.cli.tables:export",
    "search": "gputalks.cli.search:search",
    "serve": "gputalks.cli.site:serve",
    "publish": "gputalks.cli.site:publish",
}


class LazyGroup(click.Group):
    """A group whose commands are imported when they are asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        module, _, attribute = COMMANDS[name].partition(":")
        return getattr(importlib.import_module(module), attribute)


@click.group(cls=LazyGroup)
@click.version_option(__version__, package_name="gputalks")
@click.option("--project", "project_dir", envvar=PROJECT_ENV, type=click.Path(),
              help=f"The project directory (its gputalks.toml). Default: ${PROJECT_ENV}, else the nearest "
                   "gputalks.toml in this directory or a parent.")
@click.pass_context
def cli(ctx: click.Context, project_dir: str | None) -> None:
    """gputalks: a searchable index of GPU-programming talks.

    Pulls GPU MODE lectures (gpu-mode/lectures README and tree), YouTube
    playlists and videos (yt-dlp) and NVIDIA GTC sessions into one SQLite
    index, served by Datasette and exported as the docs' tables. Start a
    project in the docs' repository with `gputalks init`.
    """
    ctx.obj = project_dir
