"""Curated tables exported from the index built from the snapshot, and `export --update`."""

import json
from pathlib import Path

import pytest
import sqlite_utils
from click.testing import CliRunner

from gputalks.cli import cli
from gputalks.tables.curation import CurationError, load_curation
from gputalks.durations import human_duration
from gputalks.project.resources import DEFAULT_CURATION
from gputalks.tables.export import ExportError, render, update_markdown

from tests.conftest import SHARED

PAGE = SHARED / "docs" / "videos.fr.md"


@pytest.fixture(scope="module")
def tables():
    return load_curation()


def export(db_path, *args):
    return CliRunner().invoke(cli, ["export", "--db", str(db_path), *args])


@pytest.mark.parametrize("seconds, lang, text", [
    (3900, "fr", "1 h 05"), (43200, "fr", "12 h"), (2700, "fr", "45 min"), (3900, "en", "1 h 05 min"),
    (None, "fr", "durée inconnue")])
def test_durations_for_people(seconds, lang, text):
    assert human_duration(seconds, lang) == text


def test_gpu_mode_table(snapshot_db_path):
    result = export(snapshot_db_path, "gpu-mode-core")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "| # | Titre | Durée | Quand la regarder |"
    assert len(lines) == 2 + 9
    assert lines[2] == ("| 1 | [Profiling and Integrating CUDA kernels in PyTorch]"
                        "(https://www.youtube.com/watch?v=LuhJEEJQgUM) | 56 min | avant la partie 9 |")
    assert ("| 12 | [Flash Attention](https://www.youtube.com/watch?v=zEuwuCTEf_0) | 1 h 12 | "
            "avec le chapitre 3 de la partie 7 |") in lines
    assert lines[-1] == "| 35+ | sujets avancés |  | au fil de l'eau |"
    english = export(snapshot_db_path, "gpu-mode-core", "--lang", "en").stdout.splitlines()
    assert english[0] == "| # | Title | Length | When to watch it |" and "1 h 12 min" in english[7]


def test_stephen_jones_table_uses_gtc_and_youtube(snapshot_db, tables):
    text, warnings = render(snapshot_db, tables["stephen-jones"])
    rows = text.splitlines()[2:]
    assert rows[0].startswith("| [How GPU Computing Works](https://www.youtube.com/watch?v=3l10o0DYJXg) "
                              "| GTC Spring 2021 | 40 min |")
    assert rows[1].startswith("| [How CUDA Programming Works](https://www.youtube.com/watch?v=QQceTDjA4f4) "
                              "| GTC Spring 2022 | 41 min |")
    # no YouTube upload recorded: the On-Demand page, and the unknown length said aloud
    assert rows[2].startswith("| [How to Write A CUDA Program]"
                              "(https://www.nvidia.com/en-us/on-demand/session/gtcspring23-s51821/) | GTC Spring 2023 "
                              "| durée inconnue |")
    assert any("gtcspring23-s51821" in w and "no duration" in w for w in warnings)


def without_the_course_length(tmp_path) -> Path:
    """The shipped curation without the "12 h" it gives the freeCodeCamp course (no source records it)."""
    copy = tmp_path / "videos.fr.toml"
    copy.write_text((DEFAULT_CURATION / "videos.fr.toml").read_text().replace('length = "12 h", ', ""))
    assert 'length = "12 h"' not in copy.read_text()
    return copy


def test_viewing_path_totals(snapshot_db, tables, tmp_path):
    data = json.loads(render(snapshot_db, tables["viewing-path"], fmt="json")[0])
    assert [r["group"] for r in data["rows"]][:3] == ["Semaine 1"] * 3
    text, _ = render(snapshot_db, tables["viewing-path"])
    assert "**Semaine 1** (2 h 54)" in text  # 2376 + 4676 + 3415 s
    assert "**Semaine 2-3** (12 h 47)" in text  # the course's "12 h", from the curation (the page's own prose)
    assert "**Semaine 4** (2 h 04)" in text
    assert text.rstrip().endswith("Total : 21 h 54")
    assert "- GTC, la session d'architecture de votre carte" in text
    course, _ = render(snapshot_db, tables["freecodecamp"])
    assert "durée inconnue" not in course and "| 12 h |" in course
    bare, _ = render(snapshot_db, load_curation([without_the_course_length(tmp_path)])["viewing-path"])
    assert "**Semaine 2-3** (47 min + durée inconnue)" in bare  # no number anywhere: it says so
    assert bare.rstrip().endswith("Total : 9 h 54 + durée inconnue")


def test_csv_and_json(snapshot_db, tables):
    csv_text, _ = render(snapshot_db, tables["freecodecamp"], fmt="csv")
    assert csv_text.splitlines()[0] == "Cours,Durée,En bref"
    rows = json.loads(render(snapshot_db, tables["gpu-mode-core"], fmt="json", lang="en")[0])["rows"]
    assert rows[5]["talk_id"] == "gpumode-lecture-012" and rows[5]["duration_s"] == 4334
    assert rows[5]["when"] == "with chapter 3 of part 7"


def test_curated_tables_are_in_the_index(snapshot_db):
    assert snapshot_db.table("curated_tables").count == 4
    row = snapshot_db.execute("select talk_id, cells from curated_rows where table_id = 'gpu-mode-core' "
                              "and position = 6").fetchone()
    assert row[0] == "gpumode-lecture-012" and "chapitre 3" in row[1]


def test_missing_talk_is_a_clear_error(snapshot_db_path, tmp_path):
    curation = tmp_path / "bad.toml"
    curation.write_text('[[tables]]\nid = "t"\ncolumns = [{ key = "title" }]\n'
                        'rows = [{ talk = "gpumode:999" }, { talk = "gpumode:12" }]\n')
    result = export(snapshot_db_path, "t", "--curation", str(curation))
    assert result.exit_code == 1
    assert "table t, row 1 (gpumode:999): no talk in the index matches" in result.stderr
    allowed = export(snapshot_db_path, "t", "--curation", str(curation), "--allow-missing")
    assert allowed.exit_code == 0 and "(missing)" in allowed.stdout and "warning:" in allowed.stderr


def test_a_vanished_talk_is_an_error(fresh_db_path):
    db = sqlite_utils.Database(fresh_db_path)
    db.execute("update talks set gone_since = '2026-12-01' where id = 'gpumode-lecture-012'")
    db.conn.commit()
    result = export(fresh_db_path, "gpu-mode-core")
    assert result.exit_code == 1 and "no longer listed by its sources" in result.stderr


def marked_copy(tmp_path):
    """videos.fr.md with markers around its hand-typed tables (2.1 and 2.7)."""
    text = PAGE.read_text(encoding="utf-8")
    start = text.index("| # | Titre |")
    end = text.index("Pourquoi GPU MODE est différent")
    path_start = text.index("Semaine 1\n")
    path_end = text.index("La vidéo ne remplace pas le code")
    marked = (text[:start] + "<!-- gputalks:table gpu-mode-core -->\n" + text[start:end]
              + "<!-- /gputalks -->\n" + text[end:path_start] + "<!-- gputalks:table viewing-path -->\n"
              + text[path_start:path_end] + "<!-- /gputalks -->\n" + text[path_end:])
    page = tmp_path / "videos.fr.md"
    page.write_text(marked, encoding="utf-8")
    return page, marked


def outside(text):
    """Everything but the marked regions' bodies."""
    parts, rest = [], text
    while "<!-- gputalks:table" in rest:
        head, _, tail = rest.partition("<!-- gputalks:table")
        parts.append(head)
        rest = tail.partition("<!-- /gputalks -->")[2]
    return parts + [rest]


def test_update_changes_only_the_marked_regions_and_is_idempotent(snapshot_db_path, tmp_path):
    page, before = marked_copy(tmp_path)
    result = export(snapshot_db_path, "--update", str(page))
    assert result.exit_code == 0, result.stderr
    after = page.read_bytes().decode("utf-8")
    assert outside(after) == outside(before)  # every other byte kept
    assert "[Flash Attention](https://www.youtube.com/watch?v=zEuwuCTEf_0) | 1 h 12" in after
    assert "**Semaine 4** (2 h 04)" in after
    again = export(snapshot_db_path, "--update", str(page))
    assert "unchanged" in again.stderr and page.read_bytes().decode("utf-8") == after


@pytest.mark.parametrize("text, message", [
    ("a\n<!-- gputalks:table gpu-mode-core -->\nb\n", "never closed"),
    ("a\n<!-- /gputalks -->\n", "without an opening marker"),
    ("<!-- gputalks:table gpu-mode-core -->\n<!-- gputalks:table viewing-path -->\n<!-- /gputalks -->\n",
     "opened before"),
    ("<!-- gputalks:table nope -->\n<!-- /gputalks -->\n", "unknown table 'nope'"),
    ("<!-- gputalks:tabel gpu-mode-core -->\n<!-- /gputalks -->\n", "unknown marker"),
])
def test_bad_markers_fail_before_anything_is_written(snapshot_db_path, tmp_path, text, message):
    page = tmp_path / "page.md"
    page.write_text("<!-- gputalks:table gpu-mode-core -->\nold\n<!-- /gputalks -->\n" + text)
    before = page.read_bytes()
    result = export(snapshot_db_path, "--update", str(page))
    assert result.exit_code == 1 and message in result.stderr
    assert page.read_bytes() == before


def test_a_page_without_markers_is_an_error_that_shows_the_syntax():
    text = "# Title\n\nno markers here\n"
    with pytest.raises(ExportError, match="<!-- gputalks:table ID --> and <!-- /gputalks -->"):
        update_markdown(text, lambda table_id, lang: pytest.fail("nothing to render"))


def test_a_marker_in_a_language_gputalks_does_not_write_is_an_error():
    with pytest.raises(ExportError, match="line 2: lang=de"):
        update_markdown("x\n<!-- gputalks:table t lang=de -->\n<!-- /gputalks -->\n", lambda t, lang: "")


def test_a_crlf_page_keeps_its_line_endings():
    page = "a\r\n<!-- gputalks:table t -->\r\nold\r\n<!-- /gputalks -->\r\nb\r\n"
    assert update_markdown(page, lambda t, lang: "| x |\n|---|\n") == \
        "a\r\n<!-- gputalks:table t -->\r\n| x |\r\n|---|\r\n<!-- /gputalks -->\r\nb\r\n"


def test_the_page_keeps_a_length_the_index_does_not_know(snapshot_db_path, tmp_path):
    """The real page says the freeCodeCamp course is "12 h"; with a curation that does not, the
    index has no length for it. The regenerated page keeps "12 h" (and says so), its week and
    the path count it, and a second run changes nothing."""
    page, _ = marked_copy(tmp_path)
    curation = without_the_course_length(tmp_path)
    first = export(snapshot_db_path, "--update", str(page), "--curation", str(curation))
    assert first.exit_code == 0, first.output
    text = page.read_text()
    line = next(l for l in text.splitlines() if "86FAWCzIe_4" in l)
    assert line.endswith("(12 h, en plusieurs fois)") and "durée inconnue" not in line
    assert "kept the page's '12 h'" in first.stderr
    assert "**Semaine 2-3** (12 h 47)" in text and "Total : 21 h 54" in text
    before = page.read_text()
    again = export(snapshot_db_path, "--update", str(page), "--curation", str(curation))
    assert again.exit_code == 0 and page.read_text() == before


def test_markers_print_a_ready_block(snapshot_db_path, tmp_path):
    result = export(snapshot_db_path, "freecodecamp", "--markers", "--curation", str(without_the_course_length(tmp_path)))
    assert result.exit_code == 0 and "no duration in the index" in result.stderr  # the warning, apart
    lines = result.stdout.splitlines()
    assert lines[0] == "<!-- gputalks:table freecodecamp -->" and lines[-1] == "<!-- /gputalks -->"
    assert update_markdown(result.stdout, lambda t, lang: "new\n") == \
        "<!-- gputalks:table freecodecamp -->\nnew\n<!-- /gputalks -->\n"


def test_bad_curation_file(tmp_path):
    bad = tmp_path / "c.toml"
    bad.write_text('[[tables]]\nid = "x"\ncolumns = [{ key = "title" }]\nrows = [{ talk = "lecture 12" }]\n')
    with pytest.raises(CurationError, match="is not gpumode:N"):
        load_curation([bad])


def test_the_curation_can_give_a_length_the_sources_never_measured(snapshot_db_path, tmp_path):
    curation = tmp_path / "c.toml"
    curation.write_text('lang = "en"\n[[tables]]\nid = "course"\ncolumns = [{ key = "title" }, { key = "duration" }]\n'
                        'rows = [{ talk = "youtube:86FAWCzIe_4", length = "12 h" }, { talk = "gpumode:12", length = "1 h" }]\n')
    result = export(snapshot_db_path, "course", "--curation", str(curation))
    assert result.exit_code == 0, result.output
    rows = result.stdout.splitlines()[2:]
    assert rows[0].endswith("| 12 h |") and "no duration" not in result.stderr
    assert rows[1].endswith("| 1 h 12 min |")  # the index's own length wins over the curator's
    curation.write_text(curation.read_text().replace('length = "12 h"', 'length = "douze heures"'))
    bad = export(snapshot_db_path, "course", "--curation", str(curation))
    assert bad.exit_code == 1 and "length 'douze heures' is not like" in bad.stderr


@pytest.mark.parametrize("text, seconds", [("12 h", 43200), ("1 h 05", 3900), ("45 min", 2700), ("1h05", 3900),
                                           ("", None), ("soon", None)])
def test_a_typed_length_reads_as_seconds(text, seconds):
    from gputalks.durations import parse_length

    assert parse_length(text) == seconds


def test_every_scraped_cell_is_inert_in_rendered_markdown(snapshot_db_path, tmp_path):
    """A GTC speaker named <script>…, a title with an onerror= image: rendered by Python-Markdown
    (MkDocs) and by markdown-it-py with raw HTML on, the exported page runs nothing."""
    import shutil
    import sqlite3

    import markdown
    from markdown_it import MarkdownIt

    db_path = tmp_path / "talks.db"
    shutil.copy(snapshot_db_path, db_path)
    with sqlite3.connect(db_path) as db:
        db.execute("""update talks set speakers = '["<script>alert(1)</script>", "A <b onmouseover=x()>B</b>"]',
                      title = 'Course <img src=x onerror=alert(2)> [x](javascript:alert(3))'
                      where id = 'youtube-86FAWCzIe_4'""")
    curation = tmp_path / "c.toml"
    curation.write_text('lang = "en"\n[[tables]]\nid = "t"\ncolumns = [{ key = "title" }, { key = "speakers" }, '
                        '{ key = "event" }]\nrows = [{ talk = "youtube:86FAWCzIe_4" }]\n')
    for fmt in ("markdown", "csv", "json"):
        result = export(db_path, "t", "--curation", str(curation), "--format", fmt)
        assert result.exit_code == 0, result.output
        if fmt != "markdown":
            continue
        for html in (markdown.markdown(result.stdout, extensions=["tables"]),
                     MarkdownIt("commonmark", {"html": True}).enable("table").render(result.stdout)):
            from bs4 import BeautifulSoup

            soup = BeautifulSoup(html, "html.parser")
            assert not soup.find_all(["script", "img", "b"])  # scraped markup is text, not elements
            assert not [name for tag in soup.find_all(True) for name in tag.attrs if name.startswith("on")]
            assert not [a["href"] for a in soup.find_all("a") if not a["href"].startswith("https://")]
            assert "<script>alert(1)</script>" in soup.get_text()


def test_markers_shown_in_code_are_text(snapshot_db_path, tmp_path):
    """A page that documents the marker syntax (in a fence, or indented) keeps its examples; the
    real region beside them is updated."""
    page, before = marked_copy(tmp_path)
    example = ("How to mark a table:\n\n```markdown\n<!-- gputalks:table gpu-mode-core -->\n(generated)\n"
               "<!-- /gputalks -->\n```\n\nor, indented:\n\n    <!-- gputalks:table nope -->\n    <!-- /gputalks -->\n\n")
    page.write_text(example + before, encoding="utf-8")
    result = export(snapshot_db_path, "--update", str(page))
    assert result.exit_code == 0, result.stderr
    after = page.read_text(encoding="utf-8")
    assert after.startswith(example)
    assert "[Flash Attention](https://www.youtube.com/watch?v=zEuwuCTEf_0) | 1 h 12" in after
