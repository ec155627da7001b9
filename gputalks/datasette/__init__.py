"""gputalks' Datasette plugin: every hook it implements, each handing over to the module of its
job (pages, groups, render, facets, metadata, errors, connection). With gputalks installed, a
plain `datasette talks.db` serves the reader's pages; its templates and static files are in
templates/ and static/ beside this file."""

from __future__ import annotations

from datasette import hookimpl

from gputalks.datasette import connection, errors, facets, groups, metadata, pages, render

PLUGIN = "gputalks"  # this plugin's name: its static files are served under /-/static-plugins/gputalks/


@hookimpl
def startup(datasette):
    facets.start(datasette)

    async def read_search_vocabularies():
        await connection.read_search_vocabularies(datasette)
    return read_search_vocabularies


@hookimpl
def get_metadata(datasette, key, database, table):
    return metadata.index_metadata(datasette)


@hookimpl
def prepare_connection(conn, database, datasette):
    connection.prepare(conn, database, datasette)


@hookimpl
def prepare_jinja2_environment(env):
    render.add_filters(env)
    pages.add_filters(env)


@hookimpl
def register_routes():
    return [(pattern, pages.degrades(view)) for pattern, view in pages.ROUTES + groups.ROUTES]


@hookimpl
def register_facet_classes():
    return [facets.ItemsFacet, facets.ValueFacet]


@hookimpl
def filters_from_request(request, database, table, datasette):
    return facets.item_filters(request, database, table, datasette)


@hookimpl
def render_cell(row, value, column, table, database, datasette):
    return render.cell(row, value, column, table, database, datasette)


@hookimpl
def asgi_wrapper(datasette):
    return render.reader_pages(datasette)


@hookimpl
def extra_template_vars(template, database, table, datasette, request):
    return render.home_vars(template, database, datasette)


@hookimpl
def extra_css_urls(datasette):
    return [datasette.urls.static_plugins(PLUGIN, "gputalks.css")]


@hookimpl
def extra_body_script():
    # Datasette's base.html has no block for <html>'s attributes: the pages say their language here.
    return 'document.documentElement.lang = "en";'


@hookimpl
def sitemap_extra_paths(datasette, request):  # datasette-sitemap's hook
    return pages.sitemap_paths(datasette)


@hookimpl(tryfirst=True)
def handle_exception(datasette, request, exception):
    return errors.error_page(datasette, request, exception)
