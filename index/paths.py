"""Where the checkout keeps its configuration and Datasette files."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
CONFIG_DIR = REPO_ROOT / "config"
DEFAULT_CONFIG = CONFIG_DIR / "sources.toml"
DEFAULT_OVERRIDES = CONFIG_DIR / "overrides.toml"
CURATION_DIR = CONFIG_DIR / "curation"
METADATA = REPO_ROOT / "metadata.json"
TEMPLATES = REPO_ROOT / "datasette" / "templates"
PLUGINS = REPO_ROOT / "datasette" / "plugins"
