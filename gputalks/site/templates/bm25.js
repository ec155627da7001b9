// The served index's score of a page for a query's phrases: SQLite FTS5's bm25 (k1 1.2, b 0.75)
// with the served search's column weights (search/talks.sql: title 10, compound words 6,
// description 1, speakers 4, labels 0.5, the folder's file names 1: only for a phrase few pages
// hold, `rare`, as search/query.py's `matched`), over the page's own words, so that the static search
// orders the talks of a tier as the server does. A phrase's document frequency is the number of
// pages Pagefind finds for it; the number of talks and their average length in words come with
// the vocabulary (search-vocabulary.json).

const K1 = 1.2, B = 0.75;
const WEIGHTS = { title: 10, terms: 6, description: 1, speakers: 4, labels: 0.5, files: 1 };

// Where the stems `words` stand in a row in `field` (stems, in order): each run's first position.
export function runs(field, words) {
  const found = [];
  for (let at = 0; at + words.length <= field.length; at++) {
    if (words.every((word, n) => field[at + n] === word)) found.push(at);
  }
  return found;
}

const hits = (field, words) => runs(field, words).length;
// Whether the stems `words` stand in a row in `field`.
export const holdsRun = (field, words) => hits(field, words) > 0;

// A page's fields as the served index's columns, each its words' stems in order (the page's text
// holds every field once: its description is what is left of it past the others); its length in
// words; the stems it holds (`words`), those of its title and compound names (`titleWords`), and
// its title's length in characters (the server's "shortest title first").
export function fieldsOf(page, tokens, stem) {
  const field = (text) => tokens(text || "").map(stem);
  const fields = { title: field(page.meta.title), terms: field(page.meta.terms), speakers: field(page.meta.speakers),
                   labels: field(page.meta.labels), description: field(page.content), files: field(page.meta.files) };
  const shown = fields.title.length + fields.speakers.length + fields.labels.length;
  fields.length = fields.title.length + fields.terms.length + fields.files.length
    + Math.max(fields.description.length, shown);
  fields.words = new Set([...fields.title, ...fields.terms, ...fields.description]);
  fields.fileWords = new Set(fields.files);
  fields.titleWords = new Set([...fields.title, ...fields.terms]);
  fields.titleLength = (page.meta.title || "").length;
  return fields;
}

// The page's score for the phrases ({ words: stems, df, labelsOnly, weight }): higher is better.
export function bm25(fields, phrases, stats) {
  const norm = K1 * (1 - B + (B * fields.length) / stats.average_length);
  let score = 0;
  for (const { words, df, labelsOnly, rare, weight = 1 } of phrases) {
    const labels = hits(fields.labels, words);
    let w = WEIGHTS.labels * labels;
    if (!labelsOnly) {
      const title = hits(fields.title, words), speakers = hits(fields.speakers, words);
      w += WEIGHTS.title * title + WEIGHTS.terms * hits(fields.terms, words) + WEIGHTS.speakers * speakers
        + (rare ? WEIGHTS.files * hits(fields.files, words) : 0)
        + WEIGHTS.description * Math.max(hits(fields.description, words) - title - speakers - labels, 0);
    }
    if (!w) continue;
    const idf = Math.max(Math.log((stats.talks - df + 0.5) / (df + 0.5)), 1e-6);
    score += (weight * idf * w * (K1 + 1)) / (w + norm);
  }
  return score;
}
