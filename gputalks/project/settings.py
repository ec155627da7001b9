"""What a build reads besides the documents: the sources config, the overrides
and the curation files, loaded once before anything runs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gputalks.project.files import Project, ProjectError, read_toml, source_settings
from gputalks.project.resources import DEFAULT_CURATION, DEFAULT_OVERRIDES, DEFAULT_SOURCES, DEFAULT_TOPICS


@dataclass(frozen=True)
class Settings:
    sources: dict[str, Any]
    overrides: Path | None = None
    curation: tuple[Path, ...] = ()
    topics: Path = DEFAULT_TOPICS


def load_config(path: str | Path | None = None) -> dict[str, Any]:
    """A sources config (a project's gputalks.toml or a sources-only file); the
    shipped default when no path is given. `[gputalks]` is the project's, not a source."""
    path = Path(path) if path else DEFAULT_SOURCES
    return source_settings(read_toml(path, "sources config"), path)


def default_settings() -> Settings:
    """The shipped defaults: what `gputalks init` starts a project with."""
    return Settings(load_config(), DEFAULT_OVERRIDES, tuple(sorted(DEFAULT_CURATION.glob("*.toml"))))


def project_settings(project: Project, config_path: str | Path | None = None,
                     overrides_path: str | Path | None = None) -> Settings:
    """The project's settings, with the sources config or overrides replaced when given."""
    sources = load_config(config_path) if config_path else project.sources
    if overrides_path and not Path(overrides_path).is_file():
        raise ProjectError(f"{overrides_path}: overrides file not found (given with --overrides)")
    overrides = Path(overrides_path) if overrides_path else project.overrides
    return Settings(sources, overrides, tuple(project.curation_files), project.topics)
