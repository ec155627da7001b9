"""The files gputalks ships with (package data), found where the import system finds them.

They live in the package's own folders, in a wheel and in an editable install
alike: the default config in `gputalks/config/`, Datasette's metadata in
`gputalks/metadata.json`, the plugin's templates in `gputalks/datasette/templates/`.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]
METADATA = PACKAGE / "metadata.json"
TEMPLATES = PACKAGE / "datasette" / "templates"
DEFAULTS = PACKAGE / "config"
DEFAULT_SOURCES = DEFAULTS / "sources.toml"
DEFAULT_OVERRIDES = DEFAULTS / "overrides.toml"
DEFAULT_CURATION = DEFAULTS / "curation"
DEFAULT_TOPICS = DEFAULTS / "topics.toml"
NIGHTLY_WORKFLOW = DEFAULTS / "nightly.yml"
