"""Publishing the index: `datasette publish` with gputalks itself installed in the container
(its Datasette plugin, templates and metadata arrive through its entry points, its
dependencies from its package metadata: one list), the index served immutable (Datasette's
publish commands serve every file with `-i` and an inspect file).

Fly goes through datasette-publish-fly, Cloud Run through Datasette itself; `--generate-dir`
writes either's deployable directory without deploying.
"""

from __future__ import annotations

import re
import shlex
import shutil
import sys
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

from gputalks.site.serve import SERVE_SETTINGS

TARGETS = ("fly", "cloudrun")


GITHUB_GIT_RE = re.compile(r"^git\+(https://github\.com/[\w.-]+/[\w.-]+?)(?:\.git)?@([\w./-]+)$")


def package_spec(install_from: str | None = None) -> str:
    """What the container installs to get gputalks: this exact version from the package index,
    or `install_from` (a `git+https://…@TAG` or archive URL pip takes) when it is not there. A
    GitHub git URL becomes its archive's address: the slim images have no git."""
    spec = install_from or f"gputalks=={version('gputalks')}"
    if match := GITHUB_GIT_RE.match(spec):
        return f"{match[1]}/archive/{match[2]}.zip"
    return spec


@dataclass(frozen=True)
class Publication:
    target: str
    db_path: Path
    app: str | None = None
    install_from: str | None = None
    generate_dir: Path | None = None

    @property
    def name(self) -> str:
        return self.app or self.db_path.stem

    def installs(self) -> list[str]:
        # The Datasette this gputalks runs with (0.65, not a 1.0 alpha), then gputalks itself.
        return [f"datasette=={version('datasette')}", package_spec(self.install_from)]

    def settings(self) -> list[str]:
        return [arg for name, value in SERVE_SETTINGS.items() for arg in ("--setting", name, str(value))]


def publish_command(publication: Publication) -> list[str]:
    """The `datasette publish` command line for the publication."""
    if publication.target not in TARGETS:
        raise ValueError(f"unknown target {publication.target!r}: {' or '.join(TARGETS)}")
    command = [sys.executable, "-m", "datasette", "publish", publication.target, str(publication.db_path)]
    for package in publication.installs():
        command += ["--install", package]
    if publication.target == "fly":
        command += publication.settings() + ["--app", publication.name]
        if publication.generate_dir is not None:
            command += ["--generate-dir", str(publication.generate_dir)]
    else:  # Cloud Run takes serve settings through --extra-options
        command += ["--service", publication.name, "--extra-options", " ".join(publication.settings())]
    return command


def dockerfile(publication: Publication) -> str:
    """The Cloud Run image: gputalks (and the Datasette it runs with) installed, git first when
    the install line needs it, the index inspected at build time and served immutable."""
    installs = publication.installs()
    needs_git = any(spec.startswith("git+") for spec in installs)
    name = shlex.quote(publication.db_path.name)
    serve = " ".join(["datasette", "serve", "--host", "0.0.0.0", "-i", name, "--cors",
                      "--inspect-file", "inspect-data.json", *map(shlex.quote, publication.settings())])
    return "\n".join([
        "FROM python:3.11-slim-bookworm",
        "COPY . /app",
        "WORKDIR /app",
        *(["RUN apt-get update && apt-get install -y --no-install-recommends git && rm -rf /var/lib/apt/lists/*"]
          if needs_git else []),
        "RUN pip install --no-cache-dir " + " ".join(map(shlex.quote, installs)),
        f"RUN datasette inspect {name} --inspect-file inspect-data.json",
        "ENV PORT 8001",
        "EXPOSE 8001",
        f"CMD {serve} --port $PORT",
        ""])


def generate_cloudrun_dir(publication: Publication) -> Path:
    """The directory Cloud Run builds and deploys (`gcloud run deploy --source DIR`): the
    Dockerfile and the index, written into `generate_dir` (a new, empty folder)."""
    target = Path(publication.generate_dir)
    shutil.copy2(publication.db_path, target / publication.db_path.name)
    (target / "Dockerfile").write_text(dockerfile(publication), encoding="utf-8")
    return target
