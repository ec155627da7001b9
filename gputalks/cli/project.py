"""`gputalks init`: start a project in the docs' repository."""

from __future__ import annotations

from pathlib import Path

import click

from gputalks.cli.common import CliError
from gputalks.project.files import ProjectError, init_project, install_note


@click.command()
@click.argument("directory", default=".", type=click.Path(file_okay=False))
@click.option("--install-from", metavar="SPEC",
              help="What the nightly workflow installs when this version of gputalks is not on the package "
                   "index: a git URL (git+https://github.com/OWNER/gputalks@v0.1.0) or a path. "
                   "Default: where this gputalks was installed from (a git URL at its commit), else "
                   "gputalks==THIS_VERSION.")
def init(directory, install_from) -> None:
    """Start a project in DIRECTORY (default: here), e.g. the docs' repository.

    Writes gputalks.toml (the sources: the GPU MODE channel, the
    gpu-mode/lectures repo, GTC sessions), overrides.toml, curation/, a
    nightly workflow (.github/workflows/gputalks-nightly.yml) that installs
    this exact gputalks, and the lines of .gitignore that keep the index out
    of git. Existing files are never overwritten.
    """
    try:
        written = init_project(Path(directory), install_from)
    except (ProjectError, OSError) as exc:
        raise CliError(str(exc)) from exc
    for path in written:
        click.echo(f"wrote {path}")
    if note := install_note(install_from):
        click.echo(f"gputalks: warning: {note}", err=True)
    click.echo("next:\n"
               "  1. gputalks refresh                      # builds talks.db here (a few minutes)\n"
               "  2. mark a docs page's tables: gputalks export TABLE_ID --markers\n"
               "     (a static site for the docs: gputalks publish pages --out site, ignored by git)\n"
               "  3. gputalks export --update docs/PAGE.md\n"
               "  4. commit, push, then run the nightly workflow once by hand with first_run = true\n"
               "     (Actions > nightly refresh > Run workflow): it starts the saved state")
