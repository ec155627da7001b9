"""The shared HTTP client against a real local server (pytest-httpserver)."""

import time

import pytest
from werkzeug import Response

from gputalks.scraper.http import FetchError, FetchPolicy, Fetcher, make_client
from gputalks.scraper.records import RawDocument


class Sleeps(list):
    """Records the waits the fetcher asks for instead of sleeping them."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.fixture
def sleeps():
    return Sleeps()


def fetcher(sleeps, timeout=5.0, archive=None) -> Fetcher:
    return Fetcher(make_client(timeout=timeout), archive=archive,
                   policy=FetchPolicy(retries=3, backoff=0.5, sleep=sleeps))


def test_200_with_user_agent_and_validators(httpserver, sleeps):
    httpserver.expect_request("/readme").respond_with_data(
        "# hello", content_type="text/markdown", headers={"ETag": '"abc"'})
    doc = fetcher(sleeps).request("github", "GET", httpserver.url_for("/readme"))
    assert doc.text() == "# hello" and doc.status == 200 and doc.etag == '"abc"'
    assert doc.content_type.startswith("text/markdown")
    request, _ = httpserver.log[0]
    assert request.headers["User-Agent"].startswith("gputalks/")
    assert sleeps == []


def test_a_closed_fetcher_has_closed_its_connections(httpserver, sleeps):
    """A refresh closes its fetcher before the build: no pooled connection outlives the fetching."""
    httpserver.expect_request("/readme").respond_with_data("# hello", content_type="text/markdown")
    with fetcher(sleeps) as used:
        assert used.request("github", "GET", httpserver.url_for("/readme")).text() == "# hello"
        assert not used.client.is_closed
    assert used.client.is_closed
    with pytest.raises(RuntimeError):  # httpx refuses a closed client
        used.client.get(httpserver.url_for("/readme"))


def test_404_is_not_retried(httpserver, sleeps):
    httpserver.expect_request("/gone").respond_with_data("nope", status=404)
    with pytest.raises(FetchError) as info:
        fetcher(sleeps).request("gtc", "GET", httpserver.url_for("/gone"))
    assert info.value.status == 404 and "HTTP 404" in str(info.value)
    assert len(httpserver.log) == 1 and sleeps == []


def test_500_then_200_is_retried_with_backoff(httpserver, sleeps):
    httpserver.expect_ordered_request("/flaky").respond_with_data("busy", status=500)
    httpserver.expect_ordered_request("/flaky").respond_with_data("busy", status=503)
    httpserver.expect_ordered_request("/flaky").respond_with_data("ok")
    doc = fetcher(sleeps).request("github", "GET", httpserver.url_for("/flaky"))
    assert doc.text() == "ok" and len(httpserver.log) == 3
    assert sleeps == [0.5, 1.0]  # exponential backoff


def test_500_forever_gives_up(httpserver, sleeps):
    httpserver.expect_request("/down").respond_with_data("down", status=500)
    with pytest.raises(FetchError) as info:
        fetcher(sleeps).request("github", "GET", httpserver.url_for("/down"))
    assert info.value.status == 500 and len(httpserver.log) == 4  # 1 try + 3 retries


def test_429_honours_retry_after(httpserver, sleeps):
    httpserver.expect_ordered_request("/limited").respond_with_response(
        Response("slow down", status=429, headers={"Retry-After": "7"}))
    httpserver.expect_ordered_request("/limited").respond_with_data("[]", content_type="application/json")
    doc = fetcher(sleeps).request("github", "GET", httpserver.url_for("/limited"))
    assert doc.json() == [] and sleeps == [7.0]


def test_429_with_an_absurd_retry_after_fails_fast(httpserver, sleeps):
    httpserver.expect_request("/limited").respond_with_response(
        Response("slow down", status=429, headers={"Retry-After": "86400"}))
    with pytest.raises(FetchError, match="Retry-After"):
        fetcher(sleeps).request("github", "GET", httpserver.url_for("/limited"))
    assert sleeps == []


def test_timeout_is_retried_then_reported(httpserver, sleeps):
    def slow(request):
        time.sleep(0.6)
        return Response("late")

    httpserver.expect_request("/slow").respond_with_handler(slow)
    with pytest.raises(FetchError, match="timed out"):
        fetcher(sleeps, timeout=0.2).request("github", "GET", httpserver.url_for("/slow"))
    assert sleeps == [0.5, 1.0, 2.0]


def test_connection_refused_is_reported(sleeps):
    with pytest.raises(FetchError, match="connection failed"):
        fetcher(sleeps).request("github", "GET", "http://127.0.0.1:9/nothing-listens-here")


def test_conditional_request_returns_the_archived_document_on_304(httpserver, sleeps, archived):
    document = RawDocument(source="github", method="GET", url=httpserver.url_for("/tree"), status=200,
                           content_type="application/json", fetched_at="2026-12-01T00:00:00Z",
                           body=b"{}", etag='"v1"')
    httpserver.expect_request("/tree", headers={"If-None-Match": '"v1"'}).respond_with_data("", status=304)
    f = fetcher(sleeps, archive=archived(document))
    assert f.request("github", "GET", document.url) == document
    assert f.not_modified == 1
