"""Scraped descriptions as HTML a reader's browser can be given: CommonMark with links made
clickable, no raw HTML, then sanitised (nh3). One rendering for the served talk pages and the
static site."""

from __future__ import annotations

import nh3
from markdown_it import MarkdownIt
from markupsafe import Markup

_markdown = MarkdownIt("commonmark", {"html": False, "linkify": True}).enable("linkify")


def render_markdown(text: str) -> Markup:
    """Safe to put in a page as it is (a template's autoescape leaves it alone)."""
    return Markup(nh3.clean(_markdown.render(text), link_rel="nofollow noopener"))
