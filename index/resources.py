"""The files gputalks ships with (package data), found through importlib.resources.

`gputalks.index` is a regular package: its parent is the installed `gputalks`
directory in a wheel and the checkout in an editable install, and in both it
holds `metadata.json`, `datasette/` and the default `config/`.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

PACKAGE_ROOT = Path(str(files(__package__))).parent
METADATA = PACKAGE_ROOT / "metadata.json"
TEMPLATES = PACKAGE_ROOT / "datasette" / "templates"
PLUGINS = PACKAGE_ROOT / "datasette" / "plugins"
DEFAULTS = PACKAGE_ROOT / "config"
DEFAULT_SOURCES = DEFAULTS / "sources.toml"
DEFAULT_OVERRIDES = DEFAULTS / "overrides.toml"
DEFAULT_CURATION = DEFAULTS / "curation"
DEFAULT_TOPICS = DEFAULTS / "topics.toml"
NIGHTLY_WORKFLOW = DEFAULTS / "nightly.yml"
