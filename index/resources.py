"""The files gputalks ships with (package data), found where the import system finds them.

They live in the package's own folders, in a wheel and in an editable install
alike: the default config in `gputalks/config/`, metadata.json, the templates
and the plugins in `datasette/` (`gputalks.datasette`).
"""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path


def folder(package: str) -> Path:
    """Where a package's files are. `gputalks.datasette` has no __init__.py (a namespace
    package): a regular package named `datasette` at the top of the checkout would shadow
    Datasette itself for any `python -m` run there."""
    return Path(find_spec(package).submodule_search_locations[0])


CODE = [folder("gputalks.index"), folder("gputalks.scraper")]
DATASETTE = folder("gputalks.datasette")
METADATA = DATASETTE / "metadata.json"
TEMPLATES = DATASETTE / "templates"
PLUGINS = DATASETTE / "plugins"
DEFAULTS = folder("gputalks") / "config"
DEFAULT_SOURCES = DEFAULTS / "sources.toml"
DEFAULT_OVERRIDES = DEFAULTS / "overrides.toml"
DEFAULT_CURATION = DEFAULTS / "curation"
DEFAULT_TOPICS = DEFAULTS / "topics.toml"
NIGHTLY_WORKFLOW = DEFAULTS / "nightly.yml"
