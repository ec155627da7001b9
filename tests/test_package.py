"""gputalks as a new user meets it: a wheel installed outside the checkout, a
project started with `gputalks init` in the docs' repository, and publishing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

import gputalks
from gputalks.cli import cli

from tests.conftest import REPO, SNAPSHOT, Serving
from tests.test_export import marked_copy


@pytest.fixture(scope="session")
def wheel(tmp_path_factory) -> Path:
    """gputalks' wheel, built once a session from a copy of the checkout's files (a build in the
    checkout would leave build/ and *.egg-info behind)."""
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"
    shutil.copytree(REPO, source, symlinks=True, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "*.egg-info", "__pycache__", ".pytest_cache", "talks.db*", "talks.archive.db*", "tests", "bench", "docs"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(source), "-w", str(work / "dist")],
                   check=True, capture_output=True)
    return next((work / "dist").glob("gputalks-*.whl"))


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Path:
    """A fresh venv outside the checkout made by the install step of the nightly workflow that
    `gputalks init` writes, run verbatim: `pip install 'gputalks==X.Y.Z'`, with the wheel served
    from a local package directory (PIP_FIND_LINKS) standing in for the package index."""
    import yaml

    repo = tmp_path_factory.mktemp("docs-repo")
    result = CliRunner().invoke(cli, ["init", str(repo)])
    assert result.exit_code == 0, result.output
    workflow = yaml.safe_load((repo / ".github" / "workflows" / "gputalks-nightly.yml").read_text())
    step = next(s for s in workflow["jobs"]["refresh"]["steps"] if s.get("name") == "Install")
    assert step["run"] == f"python -m venv .venv && .venv/bin/pip install 'gputalks=={gputalks.__version__}'"
    python = Path(sys.executable).parent  # `python` in the workflow: a Python 3.11, here this one
    done = subprocess.run(["bash", "-e", "-c", step["run"]], cwd=repo, capture_output=True, text=True,
                          env={**os.environ, "PATH": f"{python}:{os.environ['PATH']}",
                               "PIP_FIND_LINKS": str(wheel.parent), "PIP_QUIET": "1"})
    assert done.returncode == 0, done.stderr
    return repo / ".venv" / "bin"


def run(bin_dir: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(bin_dir / "gputalks"), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def test_the_wheel_runs_a_project_outside_the_checkout(wheel, installed, tmp_path):
    docs = tmp_path / "docs-repo"
    docs.mkdir()
    init = run(installed, docs, "init")
    assert init.returncode == 0, init.stderr
    for name in ("gputalks.toml", "overrides.toml", "curation/videos.fr.toml",
                 ".github/workflows/gputalks-nightly.yml"):
        assert (docs / name).is_file(), name
    assert "GPUMODE" in (docs / "gputalks.toml").read_text()

    refreshed = run(installed, docs, "refresh", "--snapshot", str(SNAPSHOT))
    assert refreshed.returncode == 0, refreshed.stderr
    assert "150 talk rows written" in refreshed.stdout
    assert (docs / "talks.db").is_file()

    page, before = marked_copy(tmp_path)
    nested = docs / "chapters"  # the project is found from a subdirectory too
    nested.mkdir()
    exported = run(installed, nested, "export", "--update", str(page))
    assert exported.returncode == 0, exported.stderr
    assert "[Flash Attention](https://www.youtube.com/watch?v=" in page.read_text() != before

    with Serving([str(installed / "gputalks"), "serve", "--workers", "1"], cwd=docs) as served:
        response = httpx.get(f"{served.base}/talks/talks.json?_shape=array&_size=5")
        assert response.status_code == 200 and len(response.json()) == 5

    python = str(installed / "python")
    version = subprocess.run([python, "-c", "import gputalks; print(gputalks.__version__)"], cwd=tmp_path,
                             capture_output=True, text=True)
    assert version.stdout.strip() == wheel.name.split("-")[1] == gputalks.__version__
    for generic in ("index", "scraper", "gputalks.tests", "gputalks.bench"):
        found = subprocess.run([python, "-c", f"import {generic}"], cwd=tmp_path, capture_output=True, text=True)
        assert found.returncode != 0 and "No module named" in found.stderr


def test_the_editable_install_exposes_only_the_package():
    """tests/ and bench/ sit beside the package's folder but are not parts of it."""
    import importlib.util

    assert importlib.util.find_spec("gputalks.index").origin.startswith(str(REPO / "gputalks" / "index"))
    for name in ("gputalks.tests", "gputalks.bench", "gputalks.docs"):
        assert importlib.util.find_spec(name) is None, name
    assert (REPO / "LICENSE").read_text().lstrip().startswith("Apache License")


def test_one_folder_per_import_name():
    """No symlink, no remapped folder: a checkout without symlinks (Git for Windows' default)
    builds, and from the checkout's root the parts exist only as gputalks.*."""
    if (REPO / ".git").exists():
        listing = subprocess.run(["git", "ls-files", "-s"], cwd=REPO, capture_output=True, text=True, check=True)
        assert [line for line in listing.stdout.splitlines() if line.startswith("120000")] == []
    assert "package-dir" not in (REPO / "pyproject.toml").read_text()
    for generic in ("scraper", "index"):
        found = subprocess.run([sys.executable, "-c", f"import {generic}"], cwd=REPO, capture_output=True, text=True)
        assert found.returncode != 0 and "No module named" in found.stderr, generic


def test_the_wheel_holds_only_the_package_and_its_files(wheel):
    import zipfile

    names = zipfile.ZipFile(wheel).namelist()
    assert [n for n in names if not n.startswith(("gputalks/", "gputalks-"))] == []
    for shipped in ("gputalks/metadata.json", "gputalks/config/topics.toml", "gputalks/config/curation/videos.fr.toml",
                    "gputalks/datasette/templates/gputalks_talk.html", "gputalks/site/templates/talk.html",
                    "gputalks/search/talks.sql"):
        assert shipped in names, shipped


def test_plain_datasette_serves_the_reader_pages(snapshot_db_path, tmp_path):
    """The plugin loads from its entry points: `datasette talks.db`, no gputalks options, has the
    search page, talk pages, canned queries and the reader's templates."""
    served = tmp_path / "talks.db"
    shutil.copy(snapshot_db_path, served)
    with Serving([sys.executable, "-m", "datasette", "serve", "-i", str(served)], cwd=tmp_path) as server:
        base = server.base
        search = httpx.get(base + "/search?q=flash+attention", timeout=10)
        assert search.status_code == 200 and "gpumode-lecture-012" in search.text
        talk = httpx.get(base + "/talks/talks/gpumode-lecture-012")
        assert talk.status_code == 200 and "<title>Flash Attention · GPU talks</title>" in talk.text
        queries = httpx.get(base + "/talks.json").json()["queries"]
        assert "search_talks" in {query["name"] for query in queries}
        assert httpx.get(base + "/nope").status_code == 404


@pytest.mark.parametrize("record, expected", [
    (None, "gputalks==9.9.9"),  # from a package index: no record
    ({"url": "https://github.com/OWNER/gputalks", "vcs_info": {"vcs": "git", "commit_id": "0123abc"}},
     "git+https://github.com/OWNER/gputalks@0123abc"),
    ({"url": "https://example.org/gputalks-9.9.9.tar.gz", "archive_info": {}}, "https://example.org/gputalks-9.9.9.tar.gz"),
    ({"url": "file:///home/me/dist/gputalks-9.9.9-py3-none-any.whl", "archive_info": {}}, None),
    ({"url": "file:///home/me/gputalks", "dir_info": {"editable": True}}, None),
])
def test_init_installs_what_this_gputalks_was_installed_from(tmp_path, record, expected):
    """PEP 610's direct_url.json, as pip writes it, read from a dist-info folder."""
    import json
    from importlib.metadata import Distribution

    from gputalks.project.files import installed_from

    info = tmp_path / "gputalks-9.9.9.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: gputalks\nVersion: 9.9.9\n")
    if record is not None:
        (info / "direct_url.json").write_text(json.dumps(record))
    assert installed_from(Distribution.at(info)) == expected


def test_init_from_a_local_install_says_the_line_needs_a_published_version(tmp_path):
    """This checkout's editable install: the nightly's line is the version, and init says so."""
    result = CliRunner().invoke(cli, ["init", str(tmp_path)])
    assert result.exit_code == 0
    assert f"'pip install gputalks=={gputalks.__version__}' works once that version is published" in result.output
    assert ".venv/" in (tmp_path / ".gitignore").read_text().splitlines()


def test_init_pins_the_install_ignores_the_index_and_says_what_comes_next(tmp_path):
    (tmp_path / ".gitignore").write_text("node_modules/\n")
    result = CliRunner().invoke(cli, ["init", str(tmp_path), "--install-from",
                                      "git+https://github.com/OWNER/gputalks@v0.1.0"])
    assert result.exit_code == 0, result.output
    assert "first_run = true" in result.output and "gputalks export TABLE_ID --markers" in result.output
    ignored = (tmp_path / ".gitignore").read_text().splitlines()
    assert ignored[0] == "node_modules/" and {"talks.db", "talks.archive.db", "talks.db.*"} <= set(ignored)
    workflow = (tmp_path / ".github" / "workflows" / "gputalks-nightly.yml").read_text()
    assert ".venv/bin/pip install 'git+https://github.com/OWNER/gputalks@v0.1.0'" in workflow
    assert "__GPUTALKS_PACKAGE__" not in workflow
    again = tmp_path / "second"
    again.mkdir()
    (again / ".gitignore").write_text("talks.db\ntalks.db.*\ntalks.archive.db\ntalks.archive.db.*\n*.gputalks-tmp\n")
    assert CliRunner().invoke(cli, ["init", str(again)]).exit_code == 0
    assert (again / ".gitignore").read_text().count("talks.db\n") == 1  # nothing added twice


def test_an_unknown_key_in_the_project_file_is_one_line_for_every_command(tmp_path, monkeypatch):
    assert CliRunner().invoke(cli, ["init", str(tmp_path)]).exit_code == 0
    project = tmp_path / "gputalks.toml"
    project.write_text(project.read_text().replace('db = "talks.db"\n', 'db = "talks.db"\nbd = "oops.db"\n'))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GPUTALKS_PROJECT", raising=False)
    for command in (["status"], ["refresh", "--snapshot", str(SNAPSHOT)], ["changes"]):
        result = CliRunner().invoke(cli, command)
        assert result.exit_code == 2, (command, result.output)
        assert f"{project}: [gputalks] bd: unknown key; the keys are curation, db" in result.output


def test_commands_outside_a_project_say_how_to_start_one(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GPUTALKS_PROJECT", raising=False)
    result = CliRunner().invoke(cli, ["refresh", "--snapshot", str(SNAPSHOT)])
    assert result.exit_code == 2  # a usage error
    assert "no gputalks.toml in" in result.output and "gputalks init" in result.output
    again = CliRunner().invoke(cli, ["init", str(tmp_path)])
    assert again.exit_code == 0
    refused = CliRunner().invoke(cli, ["init", str(tmp_path)])
    assert refused.exit_code == 1 and "already exists" in refused.output


def publish(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    scratch = tmp_path / "tmp"
    scratch.mkdir(exist_ok=True)
    result = subprocess.run([sys.executable, "-m", "gputalks", "publish", *args],
                            cwd=tmp_path, capture_output=True, text=True, timeout=120,
                            env={**os.environ, "TMPDIR": str(scratch)})
    assert list(scratch.iterdir()) == []  # nothing left in the temp directory
    return result


def dockerfile_lines(target: Path) -> tuple[str, str]:
    dockerfile = (target / "Dockerfile").read_text()
    install = next(line for line in dockerfile.splitlines() if line.startswith("RUN pip install"))
    serve = next(line for line in dockerfile.splitlines() if line.startswith("CMD datasette serve"))
    assert ">" not in install  # no shell redirection hiding in a version specifier
    return install, serve


def test_publish_fly_generates_a_deployable_directory(snapshot_db_path, tmp_path):
    """The container installs this exact gputalks, whose plugin brings the pages, templates and
    metadata, and whose package metadata brings its dependencies (one list)."""
    target = tmp_path / "deploy"
    result = publish(tmp_path, "fly", "--db", str(snapshot_db_path), "--app", "gpu-talks",
                     "--generate-dir", str(target))
    assert result.returncode == 0, result.stderr
    install, serve = dockerfile_lines(target)
    assert f"datasette=={version('datasette')}" in install and f"gputalks=={gputalks.__version__}" in install
    assert " -i talks.db " in serve and "--inspect-file inspect-data.json" in serve
    assert "--setting facet_time_limit_ms 1000" in serve and "--plugins-dir" not in serve
    assert (target / "talks.db").is_file() and not (target / "plugins").exists()
    assert 'app = "gpu-talks"' in (target / "fly.toml").read_text()


def test_publish_cloudrun_generates_a_directory_too(snapshot_db_path, tmp_path):
    target = tmp_path / "deploy"
    source = "git+https://github.com/OWNER/gputalks@v" + gputalks.__version__
    result = publish(tmp_path, "cloudrun", "--db", str(snapshot_db_path), "--install-from", source,
                     "--generate-dir", str(target))
    assert result.returncode == 0, result.stderr
    assert f"wrote {target}" in result.stdout
    install, serve = dockerfile_lines(target)
    archive = f"https://github.com/OWNER/gputalks/archive/v{gputalks.__version__}.zip"  # the slim image has no git
    assert f" {archive}" in install and "gputalks==" not in install and "git+" not in install
    assert " -i talks.db " in serve and "--setting default_page_size 50" in serve
    assert (target / "talks.db").is_file()
    other = tmp_path / "other"
    elsewhere = publish(tmp_path, "cloudrun", "--db", str(snapshot_db_path), "--install-from",
                        "git+https://git.example.org/gputalks.git@v1", "--generate-dir", str(other))
    assert elsewhere.returncode == 0 and "apt-get install -y --no-install-recommends git" in \
        (other / "Dockerfile").read_text()  # a git host without archives: git comes first
    again = publish(tmp_path, "cloudrun", "--db", str(snapshot_db_path), "--generate-dir", str(target))
    assert again.returncode == 0, again.stderr  # its own earlier output: replaced whole
    assert f" {archive}" not in dockerfile_lines(target)[0]
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.md").write_text("mine\n")
    refused = publish(tmp_path, "cloudrun", "--db", str(snapshot_db_path), "--generate-dir", str(mine))
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert "not empty and was not written by gputalks" in refused.stderr
    assert [p.name for p in mine.iterdir()] == ["notes.md"]
