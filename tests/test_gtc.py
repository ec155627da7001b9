"""The GTC source: On-Demand session API, the session page, the RainFocus catalog."""

import gc
import json

import pytest

from gputalks.scraper import gtc
from gputalks.scraper.http import FetchPolicy, Fetcher, make_client
from gputalks.scraper.records import RawDocument

from tests.conftest import SHARED, SNAPSHOT


def snapshot_documents(source: str) -> list[RawDocument]:
    """Every recorded response of one source, as the fetch step would have returned it."""
    manifest = json.loads((SNAPSHOT / "manifest.json").read_text())
    return [RawDocument(source=r["source"], method=r["method"], url=r["url"], status=r["status"],
                        content_type=r["content_type"], fetched_at=r["fetched_at"],
                        body=(SNAPSHOT / r["file"]).read_bytes(), request_body=r.get("request_body"))
            for r in manifest["responses"] if r["source"] == source]


@pytest.fixture(scope="module")
def parsed(config):
    return gtc.parse(snapshot_documents("gtc"), config["gtc"])


def test_every_recorded_document_parses(parsed):
    sessions = [i for i in parsed.items if not i.from_catalog]
    catalog = [i for i in parsed.items if i.from_catalog]
    assert len(sessions) == 23 and len(catalog) == 6
    assert [p for p in parsed.problems if p.severity == "error"] == []


def test_named_sessions(parsed):
    items = {i.key: i for i in parsed.items}
    first = items["gtcspring21-s31151"]
    assert first.title == "How GPU Computing Works"  # trailing space stripped
    assert [s.name for s in first.speakers] == ["Stephen Jones"]
    assert (first.event, first.year) == ("GTC Spring 2021", 2021)
    assert first.url == "https://www.nvidia.com/en-us/on-demand/session/gtcspring21-s31151/"
    assert first.description.startswith("Come for an introduction to GPU computing")
    assert first.field_origin["title"] == "api" and first.field_origin["event"] == "api"
    assert items["gtc25-s72571"].title == "What's CUDA All About Anyway?"
    assert (items["gtcfall21-a31149"].event, items["gtcfall22-a41101"].event) == ("GTC Fall 2021", "GTC Fall 2022")
    assert (items["gtc24-s62401"].title, items["gtc24-s62401"].event) == (
        "How To Write A CUDA Program: The Ninja Edition", "GTC 2024")
    assert items["gtc26-s81537"].event == "GTC 2026"
    assert [s.name for s in items["gtc24-s62246"].speakers] == ["Chang Lan", "Nitin", "Qiao Zhang"]
    kto = next(i for i in parsed.items if i.title == "Better, Cheaper, Faster LLM Alignment With KTO")
    assert (kto.event, [s.name for s in kto.speakers]) == ("GTC 2024", ["Amanpreet Singh"])
    transforming = next(i for i in parsed.items if i.title == "Transforming AI")
    assert len(transforming.speakers) == 8


def test_sessions_share_what_repeats(parsed):
    """What repeats across sessions is held once (a rebuild holds every item: 906 -> 816 MiB at
    300,000 talks with the linker's saving), and reads as each session's own."""
    sessions = [i for i in parsed.items if not i.from_catalog]
    origins = {tuple(i.field_origin.items()) for i in sessions}
    assert 1 < len(origins) == len({id(i.field_origin) for i in sessions}) < len(sessions)
    by_event = {}
    for item in sessions:
        assert by_event.setdefault(item.event, item.event) is item.event
    assert len(by_event) > 1
    assert [i.field_origin for i in parsed.items if i.from_catalog] == [{}] * 6


def test_sessions_share_topic_and_level(config):
    """The recorded answers carry no topic: every API answer given the same one, as GTC's do."""
    documents = []
    for doc in snapshot_documents("gtc"):
        data = json.loads(doc.body) if doc.content_type.startswith("application/json") else None
        if isinstance(data, dict) and "sessionData" in data:
            data["sessionData"]["attributes"] = [{"attribute": "Topic", "value": "Accelerated Computing"},
                                                 {"attribute": "Level", "value": "Beginner"}]
            doc.body = json.dumps(data).encode()
        documents.append(doc)
    sessions = [i for i in gtc.parse(documents, config["gtc"]).items if not i.from_catalog]
    assert {(i.topic, i.level) for i in sessions} == {("Accelerated Computing", "Beginner")}
    assert len({id(i.topic) for i in sessions}) == len({id(i.level) for i in sessions}) == 1


@pytest.mark.parametrize("value, slug, expected", [
    ("GTC Digital April 2021 (GTC Spring 2021)", None, ("GTC Spring 2021", 2021)),
    ("GTC Digital April 2021", None, ("GTC Spring 2021", 2021)),
    (None, "gtcspring21-s31151", ("GTC Spring 2021", 2021)),
    ("GTC November 2021", None, ("GTC Fall 2021", 2021)),
    ("GTC San Jose 2026", None, ("GTC 2026", 2026)),
    ("GTC 2025", None, ("GTC 2025", 2025)),
    (None, "gtc24-s62400", ("GTC 2024", 2024)),
    (None, "gtcsj20-d2s43", ("GTC San Jose 2020", 2020)),
    ("GTC San Jose 2020", None, ("GTC San Jose 2020", 2020)),
    (None, "gtcsiliconvalley2019-s9956", ("GTC Silicon Valley 2019", 2019)),
    (None, "gtcsiliconvalley2018-s8854", ("GTC Silicon Valley 2018", 2018)),
    (None, "gtccn2020-cns20516", ("GTC China 2020", 2020)),
    (None, "gtcfall20-a21323eu", ("GTC Fall 2020", 2020)),
    (None, "gtcdc25-dct51159", ("GTC DC 2025", 2025)),
    (None, "gtcparis25-gp1085", ("GTC Paris 2025", 2025)),
    (None, "gtc26-cwes81481", ("GTC 2026", 2026)),
])
def test_event_names_are_normalised(value, slug, expected):
    assert gtc.normalise_event(value, slug) == expected


def test_recheck_spreads_sessions_over_the_days():
    from datetime import date, timedelta

    slugs = [f"gtc24-s{n}" for n in range(60000, 60700)]
    days = [date(2026, 12, 1) + timedelta(days=n) for n in range(7)]
    due = [sum(gtc.due_today(s, 7, d) for s in slugs) for d in days]
    assert sum(due) == 700 and min(due) > 60  # each once a week, spread evenly
    assert all(gtc.due_today(s, 1) for s in slugs)


@pytest.mark.parametrize("url, kind", [
    ("https://api-prod.nvidia.com/services/nod/api/v1/session?id=gtc24-S62191", ("api", "gtc24-s62191")),
    ("https://api-prod.nvidia.com/services/nod/api/v1/session?lang=en&id=gtc24-s62191", ("api", "gtc24-s62191")),
    ("https://api-prod.nvidia.com/services/nod/api/v1/session?id=gtc24%2Ds62191", ("api", "gtc24-s62191")),
    ("https://www.nvidia.com/en-us/on-demand/session/gtcspring21-s31151/?id=", ("page", "gtcspring21-s31151")),
    ("https://www.nvidia.com/en-us/on-demand/session/gtc25-s72571/#?id=gtc24-s62191", ("page", "gtc25-s72571")),
    ("https://www.nvidia.com/en-us/on-demand/playlist/", ("unknown", None)),
])
def test_a_document_is_known_by_the_shape_of_its_request(url, kind):
    """The API's own `?id=slug` is read without urllib; any other shape as urllib reads it."""
    doc = RawDocument("gtc", "GET", url, 200, "application/json", "t", b"{}")
    assert gtc.ondemand.document_kind(doc) == kind


def test_every_recorded_session_is_known_by_its_request(parsed):
    kinds = [gtc.ondemand.document_kind(doc) for doc in snapshot_documents("gtc")]
    assert {slug for kind, slug in kinds if kind == "api"} == {i.key for i in parsed.items if not i.from_catalog}
    assert [kind for kind in kinds if kind[0] not in ("api", "catalog")] == [("page", "gtcspring21-s31151")]


REAL_SLUGS = ["gtc24-s62400", "gtc25-s72897", "gtc25-dlit71175", "gtc26-cwes81481", "gtcdc25-dct51159",
              "gtcdc25-dc51038", "gtcparis25-gp1085", "gtcspring21-s31151", "gtcfall21-a31149",
              "gtcsiliconvalley2018-s8854", "gtcsiliconvalley2019-s9956", "gtcsj20-d2s43", "gtcfall20-a21323eu",
              "gtccn2020-cns20516"]


@pytest.mark.parametrize("slug", REAL_SLUGS)
def test_every_real_slug_form_validates_and_names_its_event(slug):
    """The slugs of public links (../shared/data/real/gtc/README.md), upper-case too."""
    assert gtc.normalise_slug(slug.upper()) == slug
    event, year = gtc.normalise_event(None, slug)
    assert event.startswith("GTC ") and 2018 <= year <= 2026 and " Sj " not in event


@pytest.mark.parametrize("slug, title, expected", [
    ("gtc26-s81595", "GTC 2026 Keynote S81595 | GTC San Jose 2026 | NVIDIA On-Demand", "GTC 2026 Keynote"),
    ("gtc25-s72571", "CUDA: New Features and Beyond S72571 | GTC 2025 | NVIDIA On-Demand",
     "CUDA: New Features and Beyond"),
    ("gtcspring21-s31151", "How GPU Computing Works | GTC Digital April 2021 | NVIDIA On-Demand",
     "How GPU Computing Works"),
    ("gtc25-s72000", "Scaling to H100 and B200 | GTC 2025 | NVIDIA On-Demand", "Scaling to H100 and B200"),
    ("gtcfall20-a21323", "Developing CUDA Kernels to Push Tensor Cores to the Absolute Limit A21323 | GTC Digital "
     "October 2020 | NVIDIA On-Demand", "Developing CUDA Kernels to Push Tensor Cores to the Absolute Limit"),
    ("gtc25-dlit71175", "Accelerating Data Science with RAPIDS [DLIT71175] | GTC 2025 | NVIDIA On-Demand",
     "Accelerating Data Science with RAPIDS"),
    ("gtc26-cwes81481", "CWES81481: Connect With the Experts: CUDA | GTC 2026 | NVIDIA On-Demand",
     "Connect With the Experts: CUDA"),
    ("gtc24-se62000", "GTC Special Address SE62000-CN | GTC 2024 | NVIDIA On-Demand", "GTC Special Address"),
    ("gtc24-s62001", "Inside the RTX A6000 Workstation | GTC 2024 | NVIDIA On-Demand", "Inside the RTX A6000 Workstation"),
])
def test_a_page_title_loses_its_session_code(slug, title, expected):
    page = f"<html><head><title>{title}</title></head><body></body></html>"
    assert gtc.parse_page(page, slug)["title"] == expected


@pytest.mark.parametrize("text, slug, expected", [
    ("GTC Digital Spring 2023", None, "GTC Spring 2023"), (None, "gtcspring23-s51821", "GTC Spring 2023"),
    ("GTC Digital April 2021", None, "GTC Spring 2021"), ("GTC Digital October 2020", None, "GTC Fall 2020"),
    ("GTC San Jose 2026", None, "GTC 2026"), (None, "gtc24-s62400", "GTC 2024"), ("GTC 2014", None, "GTC 2014"),
    (None, "gtcsj20-s21234", "GTC San Jose 2020"), ("GTC Silicon Valley 2019", None, "GTC Silicon Valley 2019"),
    ("GTC Europe 2018 (Munich)", None, "GTC Europe 2018"), ("GTC Japan 2016", None, "GTC Japan 2016"),
    ("GTC Taiwan 2018", None, "GTC Taiwan 2018"), ("GTC Israel 2018", None, "GTC Israel 2018"),
    ("GTC DC 2019", None, "GTC DC 2019"), (None, "gtccn2020-cns20516", "GTC China 2020"), ("GTC Paris 2025", None, "GTC Paris 2025"),
])
def test_one_name_for_each_gtc(text, slug, expected):
    assert gtc.normalise_event(text, slug)[0] == expected


def test_slug_case_is_normalised():
    assert gtc.normalise_slug("gtc25-S72571") == "gtc25-s72571"
    with pytest.raises(ValueError, match="not an On-Demand session slug"):
        gtc.normalise_slug("not a slug")


def test_page_fallback_on_the_real_page():
    page = gtc.parse_page((SNAPSHOT / "gtc/page-gtcspring21-s31151.html").read_text(), "gtcspring21-s31151")
    assert page["title"] == "How GPU Computing Works"
    assert page["event_raw"] == "GTC Digital April 2021"
    assert page["session_id"] == "S31151"
    assert [s.name for s in page["speakers"]] == ["Stephen Jones"]
    assert page["description"].startswith("Come for an introduction to GPU computing")
    # Without the API answer, the page alone makes the item, and says so per field.
    page_doc = next(d for d in snapshot_documents("gtc") if d.url.endswith("/gtcspring21-s31151/"))
    item = gtc.parse([page_doc], {}).items[0]
    assert item.title == "How GPU Computing Works" and item.event == "GTC Spring 2021"
    assert item.field_origin["title"] == "page" and item.field_origin["description"] == "page"


def test_a_read_page_leaves_nothing_for_the_cyclic_collector():
    """A build runs with the cyclic collector off (build.collector_paused): a page's tree,
    whose parent and child links are cycles, must be freed when read, not kept until the end.
    Only the page's own objects count: another test's garbage (a Datasette connection let go of
    by its thread) may come due meanwhile."""
    html = (SNAPSHOT / "gtc/page-gtcspring21-s31151.html").read_text()
    gtc.parse_page(html, "gtcspring21-s31151")  # bs4's one-time import first
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)  # what the collector finds is kept in gc.garbage, to be looked at
    try:
        pages = [gtc.parse_page(html, "gtcspring21-s31151") for _ in range(20)]
        gc.collect()
        left = [o for o in gc.garbage if type(o).__module__.startswith("bs4")]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert left == []
    assert {page["title"] for page in pages} == {"How GPU Computing Works"}


def local_config(httpserver, **extra) -> dict:
    return {"api": httpserver.url_for("/api/session"), "page": httpserver.url_for("/page/{slug}/"),
            "catalog_api": httpserver.url_for("/api/search"), **extra}


def fetcher() -> Fetcher:
    return Fetcher(make_client(timeout=2), policy=FetchPolicy(sleep=lambda s: None))


def test_catalog_paging_against_a_local_server(httpserver):
    """Three pages: sectionList[0].items first, top-level items after, until total."""
    def entry(n):
        return {"sessionID": f"id{n}", "title": f"Session {n}", "participants": [{"fullName": f"Speaker {n}"}]}
    form = gtc.CATALOG_FORM
    httpserver.expect_ordered_request("/api/search", method="POST", data=form).respond_with_json(
        {"sectionList": [{"items": [entry(1), entry(2)], "total": 5}]})
    httpserver.expect_ordered_request("/api/search", method="POST", data=form + "&from=2").respond_with_json(
        {"items": [entry(3), entry(4)], "total": 5})
    httpserver.expect_ordered_request("/api/search", method="POST", data=form + "&from=4").respond_with_json(
        {"items": [entry(5)], "total": 5})
    config = local_config(httpserver, catalogs=[{"event": "GTC 2024", "rfapiprofileid": "p",
                                                 "rfwidgetid": "w", "delay": 0}])
    fetched = gtc.fetch(fetcher(), config)
    assert len(fetched.documents) == 3 and fetched.problems == []
    request, _ = httpserver.log[0]
    assert request.headers["rfwidgetid"] == "w" and request.headers["rfapiprofileid"] == "p"
    items = gtc.parse(fetched.documents, config).items
    assert [i.title for i in items] == [f"Session {n}" for n in range(1, 6)]
    assert all(i.event == "GTC 2024" for i in items)


def test_error_cases_are_per_item_problems(httpserver):
    good = (SNAPSHOT / "gtc/session-gtcspring22-s41487.json").read_bytes()
    httpserver.expect_request("/api/session", query_string="id=gtcspring22-s41487").respond_with_data(
        good, content_type="application/json")
    httpserver.expect_request("/api/session", query_string="id=gtc24-s99999").respond_with_data("no", status=404)
    httpserver.expect_request("/page/gtc24-s99999/").respond_with_data("no", status=404)
    httpserver.expect_request("/api/session", query_string="id=gtc24-s62400").respond_with_data(
        "<html><body>Access denied</body></html>", content_type="text/html")
    httpserver.expect_request("/page/gtc24-s62400/").respond_with_data(
        "<html><body><p>new layout</p></body></html>", content_type="text/html")
    httpserver.expect_request("/api/search", method="POST").respond_with_data("expired", status=403)
    config = local_config(httpserver, sessions=["gtcspring22-s41487", "gtc24-s99999", "gtc24-S62400"],
                          catalogs=[{"event": "GTC 2024", "delay": 0}])
    fetched = gtc.fetch(fetcher(), config)
    reasons: dict[str, list[str]] = {}
    for p in fetched.problems:
        reasons.setdefault(p.item, []).append(p.reason)
    assert any("HTTP 404" in r for r in reasons["gtc24-s99999"])
    assert any("HTTP 403" in r for r in reasons["catalog GTC 2024 from=0"])
    # HTML where JSON was expected, then a page whose layout changed: both said, neither archived
    assert any("not valid JSON" in r for r in reasons["gtc24-s62400"])
    assert any("no <title>" in r for r in reasons["gtc24-s62400"])
    assert all(p.severity == "error" for p in fetched.problems)
    parsed = gtc.parse(fetched.documents, config)
    assert [i.key for i in parsed.items] == ["gtcspring22-s41487"]


def test_one_person_is_one_speaker_on_the_real_2026_catalog():
    """The real GTC 2026 catalog writes internal suffixes after some names ("Stephen Jones (SW)")
    and nicknames inside others ("Ray (Yi-Ting) Wang"): suffixes go, nicknames stay, and no two
    spellings of one person remain."""
    import json

    from gputalks.scraper.titles import speaker_name

    sessions = json.loads((SHARED / "real" / "gtc" / "gtc26-catalog-sessions.json").read_text())
    names = {s["name"] for session in sessions for s in session.get("speakers") or []}
    cleaned = {speaker_name(name) for name in names}
    assert speaker_name("Stephen Jones (SW)") == "Stephen Jones"
    assert speaker_name("Ray Wang (HW-Comp DevTech-CN05)") == "Ray Wang"
    assert speaker_name("Ray (Yi-Ting) Wang") == "Ray (Yi-Ting) Wang"
    assert {"Juan Pablo (JP) Guerra", "Ji Yuan (Steven) Feng", "Zheng-Yong (Arsa) Ang"} <= cleaned
    assert "Mayank Jain" in cleaned and "Neel Patel" in cleaned
    assert not [name for name in cleaned if name.endswith(")")]
    assert len([name for name in names if name.endswith(")")]) == 5


def test_a_gtc_talk_is_dated_by_its_event_not_a_later_upload(snapshot_db):
    """How GPU Computing Works was a GTC Spring 2021 session; its YouTube upload came in 2022.
    Its date is the event's year, and its provenance says why."""
    date, year, sources = snapshot_db.execute(
        "select date, year, field_sources from talks where id = 'gtc-gtcspring21-s31151'").fetchone()
    assert (date, year) == ("2021", 2021)
    assert json.loads(sources)["date"] == "gtc:the event's year; the video came later"


@pytest.mark.parametrize("slug", ["gtc2024-s62400", "gtc24-62400", "gtc24_s62400", "cuda-s1234"])
def test_a_misshapen_slug_is_refused(slug):
    with pytest.raises(ValueError, match="not an On-Demand session slug"):
        gtc.normalise_slug(slug)
