-- The one ranking of talks for a reader's words (:q): `/search`, `/search.json`, the
-- `search_talks` canned query, `gputalks search`. gputalks_search(:q, tier) (search/query.py)
-- turns the words into the FTS5 expression of each tier:
--   0 titled: the title holds every word (shortest title first),
--   1 everywhere: every word anywhere (title, compound words, description, speakers, labels),
--   2 mostly: every word but one (queries of 3 to 8 words),
--   3 related: every topic or concept the words name, through the talks' terms for it,
--   4 somewhere: any word (stop words never count), the talks holding more of the reader's words
--     (as typed: gputalks_held, search/functions.py, "how many, then which topics") first, and of those holding as
--     many, one of each set of topics held in turn ("cutlass and triton": CUTLASS, Triton, ...);
-- each tier by bm25 over those columns, 50 talks in all ("related topic" says "some of your words"
-- when a word naming nothing is in no talk: "kubernetes deployment" is no inference talk's
-- subject); the talks gone from their sources left out by their few rowids (a partial index of
-- them), not by reading every matching talk's row.
-- ${open} and ${close} mark the matched words of the excerpt (search/ranking.py fills them in).
with
query as materialized (select gputalks_search(:q, 'title') as in_title, gputalks_search(:q, 'every') as every, gputalks_search(:q, 'most') as most, gputalks_search(:q, 'related') as related, gputalks_search(:q, 'some') as some, gputalks_search(:q, 'highlight') as highlight, gputalks_knows_all(:q) as knows_all),
gone as materialized (select rowid from talks where gone_since is not null),
titled as materialized (select t.rowid, 0 as tier, length(t.title) as title_length, bm25(talks_fts, 10.0, 6.0, 1.0, 4.0, 0.5, 1.0) as score from talks_fts f join talks t on t.rowid = f.rowid where talks_fts match (select in_title from query) and t.gone_since is null order by title_length, score limit 50),
everywhere as materialized (select f.rowid, 1 as tier, null as title_length, bm25(talks_fts, 10.0, 6.0, 1.0, 4.0, 0.5, 1.0) as score from talks_fts f where (select count(*) from titled) < 50 and talks_fts match (select every from query) and f.rowid not in gone and f.rowid not in (select rowid from titled) order by score limit 50),
mostly as materialized (select f.rowid, 2 as tier, null as title_length, bm25(talks_fts, 10.0, 6.0, 1.0, 4.0, 0.5, 1.0) as score from talks_fts f where (select count(*) from titled) + (select count(*) from everywhere) < 50 and talks_fts match (select most from query) and f.rowid not in gone and f.rowid not in (select rowid from titled union all select rowid from everywhere) order by score limit 50),
related as materialized (select f.rowid, 3 as tier, null as title_length, bm25(talks_fts, 10.0, 6.0, 1.0, 4.0, 0.5, 1.0) as score from talks_fts f where (select count(*) from titled) + (select count(*) from everywhere) + (select count(*) from mostly) < 50 and talks_fts match (select related from query) and f.rowid not in gone and f.rowid not in (select rowid from titled union all select rowid from everywhere union all select rowid from mostly) order by score limit 50),
somewhere as materialized (select f.rowid, 4 as tier, null as title_length, bm25(talks_fts, 10.0, 6.0, 1.0, 4.0, 0.5, 1.0) as score from talks_fts f where (select count(*) from titled) + (select count(*) from everywhere) + (select count(*) from mostly) + (select count(*) from related) < 50 and talks_fts match (select some from query) and f.rowid not in gone and f.rowid not in (select rowid from titled union all select rowid from everywhere union all select rowid from mostly union all select rowid from related) order by score limit 50),
best as (select * from (select * from titled union all select * from everywhere union all select * from mostly union all select * from related union all select * from somewhere) order by tier, title_length, score limit 50),
excerpts as materialized (select rowid, snippet(talks_fts, 2, '${open}', '${close}', ' … ', 16) as excerpt from talks_fts where talks_fts match (select highlight from query) and +rowid in (select rowid from best)),
held as materialized (select best.*, case when best.tier = 4 then gputalks_held(:q, t.title, t.search_terms, t.description, t.speaker_names, t.folder_words, t.search_labels) end as held from best join talks t on t.rowid = best.rowid)
select t.id, t.title, t.speaker_names as speakers, t.series, t.event, t.year, t.date, t.duration_s, t.topics, e.excerpt, case when h.tier = 3 and not (select knows_all from query) then 4 else h.tier end as tier from held h left join excerpts e on e.rowid = h.rowid join talks t on t.rowid = h.rowid order by h.tier, h.title_length, cast(h.held as integer) desc, row_number() over (partition by h.held order by h.score), h.score
