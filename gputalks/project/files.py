"""The project: a directory with a `gputalks.toml`, usually the docs' own repository.

Every command finds its project the way ruff or mkdocs find theirs: `--project
DIR`, else `$GPUTALKS_PROJECT`, else the nearest `gputalks.toml` walking up from
the current directory. The file holds the sources config (`[github]`,
`[youtube]`, `[gtc]`, or `sources = "path"` pointing at a separate file) and,
under `[gputalks]`, where the index, the overrides and the curation live
(relative to the file). `gputalks init` writes a starter project.
"""

from __future__ import annotations

import json
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from importlib.metadata import Distribution

from gputalks.project import PROJECT_ENV, PROJECT_FILE
from gputalks.project.validation import SourcesConfig, validated
from gputalks.project.resources import DEFAULT_CURATION, DEFAULT_OVERRIDES, DEFAULT_SOURCES, DEFAULT_TOPICS, NIGHTLY_WORKFLOW

WORKFLOW_PATH = Path(".github") / "workflows" / "gputalks-nightly.yml"


class ProjectError(ValueError):
    """No project, or a project file that cannot be read; the message is one line."""


class NoProject(ProjectError):
    """No gputalks.toml here or above: commands that can work without one do."""


@dataclass(frozen=True)
class Project:
    """Where a project keeps things; paths are absolute."""

    root: Path
    file: Path
    db: Path
    overrides: Path
    curation: Path
    sources_file: Path
    sources: dict[str, Any] = field(default_factory=dict, compare=False)
    topics_file: Path = DEFAULT_TOPICS

    @property
    def topics(self) -> Path:
        """The project's topic vocabulary, else the shipped one."""
        return self.topics_file if self.topics_file.is_file() else DEFAULT_TOPICS

    @property
    def curation_files(self) -> list[Path]:
        return sorted(self.curation.glob("*.toml"))


def read_toml(path: Path, what: str) -> dict[str, Any]:
    """A TOML file as a dict; a one-line ProjectError naming the file when it is missing or invalid."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ProjectError(f"{path}: {what} not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ProjectError(f"{path}: cannot read {what} ({exc})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ProjectError(f"{path}: not valid TOML ({exc})") from exc


def find_project_file(explicit: str | Path | None = None, start: Path | None = None) -> Path:
    """The project file: explicit (a directory or the file), $GPUTALKS_PROJECT, or walking up."""
    given = explicit or os.environ.get(PROJECT_ENV)
    if given:
        path = Path(given)
        path = path / PROJECT_FILE if path.is_dir() else path
        if not path.is_file():
            raise ProjectError(f"{path}: no {PROJECT_FILE} there (from --project or ${PROJECT_ENV})")
        return path.resolve()
    here = (start or Path.cwd()).resolve()
    for directory in (here, *here.parents):
        if (directory / PROJECT_FILE).is_file():
            return directory / PROJECT_FILE
    raise NoProject(f"no {PROJECT_FILE} in {here} or any parent directory; run `gputalks init` "
                    "to start a project here, or pass --project DIR")


# What [gputalks] may say: where the project's files live.
PROJECT_KEYS = frozenset({"db", "sources", "overrides", "curation", "topics"})


def load_project(explicit: str | Path | None = None, start: Path | None = None) -> Project:
    path = find_project_file(explicit, start)
    data = read_toml(path, "project file")
    settings = data.get("gputalks", {})
    if not isinstance(settings, dict):
        raise ProjectError(f"{path}: [gputalks] must be a table")
    unknown = sorted(set(settings) - PROJECT_KEYS)
    if unknown:
        raise ProjectError(f"{path}: [gputalks] {unknown[0]}: unknown key; the keys are "
                           f"{', '.join(sorted(PROJECT_KEYS))}")
    root = path.parent

    def place(key: str, default: str) -> Path:
        value = settings.get(key, default)
        if not isinstance(value, str) or not value:
            raise ProjectError(f"{path}: [gputalks] {key} must be a path (a string), got {value!r}")
        return (root / value).resolve()

    sources_file = place("sources", PROJECT_FILE)
    sources = data if sources_file == path else read_toml(sources_file, "sources config")
    return Project(root=root, file=path, db=place("db", "talks.db"), overrides=place("overrides", "overrides.toml"),
                   curation=place("curation", "curation"), sources_file=sources_file,
                   topics_file=place("topics", "topics.toml"),
                   sources=source_settings(sources, sources_file))


def source_settings(data: dict[str, Any], path: Path) -> dict[str, Any]:
    """The sources of a config file (not its [gputalks] table), validated."""
    return validated(SourcesConfig, {k: v for k, v in data.items() if k != "gputalks"}, path)


STARTER_HEADER = """\
# gputalks project: what to follow, and where the index, the overrides and the
# curation of this repository's docs live (paths relative to this file).
# Every gputalks command run in this directory or below uses it.

[gputalks]
db = "talks.db"
overrides = "overrides.toml"
curation = "curation"

"""


# What the nightly workflow's install step installs: its placeholder in the starter workflow.
PACKAGE_PLACEHOLDER = "__GPUTALKS_PACKAGE__"
# What a project's repository should not track: the index, its archive, the lock, a build.
IGNORED = ["talks.db", "talks.db.*", "talks.archive.db", "talks.archive.db.*", "*.gputalks-tmp", ".venv/", "site/"]


def installed_from(found: "Distribution | None" = None) -> str | None:
    """This gputalks as pip takes it again, from where it was installed (PEP 610's
    direct_url.json): a VCS URL at its commit, an archive's web address, or, with no such record
    (installed from a package index), this exact version. None for a local file or folder, which
    a workflow on another machine cannot reach."""
    from importlib.metadata import distributions

    # What pip installed (a .dist-info, with METADATA), not a build's egg-info in a source tree.
    found = found or next((d for d in distributions(name="gputalks") if d.read_text("METADATA") is not None), None)
    if found is None:
        return None
    record = found.read_text("direct_url.json")
    if not record:
        return f"gputalks=={found.version}"
    try:
        direct = json.loads(record)
    except ValueError:
        return None
    url = str(direct.get("url", ""))
    if vcs := direct.get("vcs_info"):
        return f"{vcs.get('vcs', 'git')}+{url}@{vcs.get('commit_id') or vcs.get('requested_revision')}"
    if "archive_info" in direct and url.startswith(("https://", "http://")):
        return url
    return None


def install_spec(install_from: str | None = None) -> str:
    """What `pip install` takes in the nightly: `install_from` (a git URL or a path), else where
    this gputalks was installed from (`installed_from`), else this exact version from the
    package index (`install_note` says it must be published first); quoted."""
    from importlib.metadata import version

    spec = install_from or installed_from() or f"gputalks=={version('gputalks')}"
    return "'" + spec.replace("'", "") + "'"


def install_note(install_from: str | None = None) -> str | None:
    """One line when the nightly's install line names a version the package index may not have."""
    if install_from or installed_from():
        return None
    from importlib.metadata import version

    return (f"this gputalks was installed from a local file or folder: the nightly's 'pip install gputalks=="
            f"{version('gputalks')}' works once that version is published; until then pass --install-from "
            "git+https://github.com/OWNER/gputalks@TAG")


def nightly_workflow(install_from: str | None = None) -> str:
    """The starter nightly workflow, installing the gputalks that wrote it."""
    return NIGHTLY_WORKFLOW.read_text(encoding="utf-8").replace(PACKAGE_PLACEHOLDER, install_spec(install_from))


def ignore_lines(existing: str) -> str:
    """`existing` .gitignore text with gputalks' files added (those it lacks), or "" if none."""
    have = {line.strip() for line in existing.splitlines()}
    missing = [pattern for pattern in IGNORED if pattern not in have]
    if not missing:
        return ""
    head = existing if not existing or existing.endswith("\n") else existing + "\n"
    return head + "# gputalks: the index and its archive (kept in the state release), the venv, the static site\n" + \
        "\n".join(missing) + "\n"


def init_project(directory: Path, install_from: str | None = None) -> list[Path]:
    """Write a starter project into `directory`; never overwrites (a .gitignore is extended).
    Returns the files written."""
    directory.mkdir(parents=True, exist_ok=True)
    if (directory / PROJECT_FILE).exists():
        raise ProjectError(f"{directory / PROJECT_FILE} already exists; nothing written")
    plan: dict[Path, str] = {
        directory / PROJECT_FILE: STARTER_HEADER + DEFAULT_SOURCES.read_text(encoding="utf-8"),
        directory / "overrides.toml": DEFAULT_OVERRIDES.read_text(encoding="utf-8"),
        directory / "topics.toml": DEFAULT_TOPICS.read_text(encoding="utf-8"),
        directory / WORKFLOW_PATH: nightly_workflow(install_from),
    }
    for curation in sorted(DEFAULT_CURATION.glob("*.toml")):
        plan[directory / "curation" / curation.name] = curation.read_text(encoding="utf-8")
    gitignore = directory / ".gitignore"
    extended = ignore_lines(gitignore.read_text(encoding="utf-8") if gitignore.exists() else "")
    written = []
    for target, text in [*plan.items(), *([(gitignore, extended)] if extended else [])]:
        if target.exists() and target != gitignore:
            continue  # the project's own file wins over the starter
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.with_name(target.name + ".gputalks-tmp")
        temporary.write_text(text, encoding="utf-8")
        temporary.replace(target)
        written.append(target)
    return written
