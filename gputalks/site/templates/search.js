// The static site's search: the served search's tiers (gputalks/search/query.py) over Pagefind's
// index, in the reader's browser. The vocabulary (stop words, topic aliases, the concepts'
// English and French phrases, their terms and topics, the ways of writing one thing, the words a
// misspelling is corrected to)
// is the index's, written beside this file by `gputalks publish pages` (search-vocabulary.json).
// Tiers: 0 every word, 1 every word but one, 2 related topic, 3 some of your words.

import { bm25, fieldsOf, holdsRun, runs } from "./bm25.js";
import { stemmer } from "./stemmer.js";

const MATCHES = ["all your words", "most of your words", "related topic", "some of your words"];
const MAX_WORDS = 32, MOST_WORDS = 8, SHORTEST_CORRECTED = 4;
// The pages a search reads to decide its tiers: Pagefind's best by score, fetched together
// (a common word matches thousands of pages of a large site; 50 results are shown).
const CANDIDATES = 300;

const plain = (word) => word.normalize("NFKD").replace(/[\u0300-\u036f]/g, "");
// French phrases compared without accents and plural endings (the server stems them with Snowball).
const frenchForm = (word) => plain(word).replace(/(?<=\w{3})[sx]$/, "");
// "C++" is one word, "cpp", as the server's search/words.py writes it.
const tokens = (text) => (text.toLowerCase().replace(/(?<![\p{L}\p{N}_])c\+\+/gu, "cpp").match(/[\p{L}\p{N}_]+/gu) || []);

function editDistance(a, b, limit) {  // optimal string alignment: a swap of two letters is one edit
  if (Math.abs(a.length - b.length) > limit) return limit + 1;
  const d = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0][j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.length][b.length];
}

function likeness(a, b) {  // rapidfuzz's fuzz.ratio: the share of letters both keep in order
  let row = Array(b.length + 1).fill(0);
  for (let i = 1; i <= a.length; i++) {
    const next = [0];
    for (let j = 1; j <= b.length; j++) next[j] = a[i - 1] === b[j - 1] ? row[j - 1] + 1 : Math.max(row[j], next[j - 1]);
    row = next;
  }
  return (2 * row[b.length]) / (a.length + b.length || 1);
}

export async function loadVocabulary(root) {
  const data = await (await fetch(`${root}search-vocabulary.json`)).json();
  const key = (words) => words.join(" ");
  // Each word by its lemma ("fonctionnent": fonctionner), the stop words inside a phrase left out
  // ("multiplication de matrices"), those at its ends kept, as on the server.
  const lemmas = new Map(Object.entries(data.lemmas || {}));
  const frenchKey = (words) => words.filter((w, n) => n === 0 || n === words.length - 1 || !data.stop.includes(w))
    .map((w) => frenchForm(lemmas.get(w) || w)).join(" ");
  const vocabulary = { stop: new Set(data.stop), words: data.words, aliases: new Map(), phrases: new Map(),
                       phrasesFr: new Map(), same: new Map(), terms: data.terms, topics: data.concept_topics, frenchKey,
                       longest: 1, stats: { talks: data.talks, average_length: data.average_length },
                       topicTalks: data.topic_talks || {}, variants: new Map(Object.entries(data.variants || {})),
                       common: new Set(data.common || []), broad: new Set(data.broad || []), rare: data.rare };
  for (const [alias, topics] of Object.entries(data.aliases)) vocabulary.aliases.set(key(tokens(alias)), topics);
  // The words of the broad concepts' terms and of the aliases naming only broad topics, by their stems.
  vocabulary.broadWords = new Set([
    ...[...vocabulary.broad].flatMap((concept) => data.terms[concept] || []),
    ...Object.entries(data.aliases).filter(([, topics]) => topics.every((t) => vocabulary.broad.has(t))).map(([a]) => a),
  ].map((text) => tokens(text).map(stem).join(" ")));
  // English phrases by their words' stems (as the vocabulary writes them), as the server matches
  // them ("measuring": "measure").
  for (const [stems, concept] of Object.entries(data.phrases)) vocabulary.phrases.set(stems, concept);
  for (const [phrase, concept] of Object.entries(data.phrases_fr)) vocabulary.phrasesFr.set(frenchKey(tokens(phrase)), concept);
  for (const forms of data.same) {  // a way of writing two things: the first one listed
    for (const form of forms) {
      const formKey = frenchKey(tokens(form));
      if (!vocabulary.same.has(formKey)) vocabulary.same.set(formKey, forms.map(tokens));
    }
  }
  for (const text of [...Object.keys(data.aliases), ...Object.keys(data.phrases), ...Object.keys(data.phrases_fr),
                      ...data.same.flat()]) {
    vocabulary.longest = Math.max(vocabulary.longest, tokens(text).length);
  }
  return vocabulary;
}

export function units(query, vocabulary) {
  const words = tokens(query.normalize("NFKC")).slice(0, MAX_WORDS);  // full-width "ｇｐｕ" is "gpu"
  const found = [];
  for (let at = 0; at < words.length;) {
    let unit = null, size = Math.min(vocabulary.longest, words.length - at);
    for (; size > 0 && !unit; size--) {
      // A way of writing one thing names what its other ways name ("mémoire globale": "global memory");
      // every way but the span's own words is kept, as on the server: "tensor cors" is "tensor cores".
      // A French word by its lemma, as on the server: "communiquent" names "communiquer".
      const span = words.slice(at, at + size), key = vocabulary.frenchKey(span);
      const same = (vocabulary.same.get(key) || []).filter((form) => form.join(" ") !== span.join(" "));
      const forms = [span, ...same].map((form) => form.join(" "));
      const topics = [...new Set(forms.flatMap((form) => vocabulary.aliases.get(form) || []))];
      const concept = [span, ...same].map((form) => vocabulary.phrases.get(form.map(stem).join(" "))).find(Boolean)
        || vocabulary.phrasesFr.get(key);
      if (topics.length || concept || same.length) unit = { words: span, topics, concept, same, stop: false };
    }
    if (unit) { at += unit.words.length; } else {
      // A word naming nothing: a stop word, or a word written as the index's own too: a speaker's
      // given name ("ben": Benjamin), an American spelling ("optimisation": optimization).
      const stop = vocabulary.stop.has(words[at]);
      const same = stop ? [] : (vocabulary.variants.get(words[at]) || []).map((variant) => [variant]);
      unit = { words: [words[at]], topics: [], concept: null, same, stop };
      at += 1;
    }
    found.push(unit);
  }
  if (found.every((u) => u.stop)) found.forEach((u) => { u.stop = false; });
  return found.filter((u) => !u.stop);
}

const known = new Map();  // every page a search met, by id: what its data() reads
const fields = new Map();  // id -> its words as the served index's columns (bm25.js `fieldsOf`)
const stem = (word) => stemmer(plain(word));  // as the served index holds a word: accent-free, Porter's stem

async function pages(pagefind, text, filters) {
  const search = await pagefind.search(text, filters ? { filters } : {});
  const results = search ? search.results : [];
  results.forEach((r) => known.set(r.id, r));
  return results;
}

async function textOf(id) {  // the stems of the page's words (its fields' `words`)
  if (!fields.has(id)) fields.set(id, fieldsOf(await known.get(id).data(), tokens, stem));
  return fields.get(id).words;
}

// Whether a page holds the unit's words, or another way of writing them, as the served index
// decides it: by the words' stems ("profiling" holds "profile"), the words of compound names
// included ("KernelBot": kernel). Pagefind itself matches loosely (typos, prefixes): the tiers are
// decided on the page's words.
const holdsWords = (text, words) => words.every((word) => text.has(stem(word)));
const holds = (text, unit) => [unit.words, ...unit.same].some((words) => holdsWords(text, words));

async function spelt(pagefind, unit, vocabulary) {
  // A word no page holds: the closest word of titles, speakers and topics (one edit; two from 8 letters).
  const word = unit.words[0];
  if (unit.words.length > 1 || unit.same.length || word.length < SHORTEST_CORRECTED || /^\d+$/.test(word)) return unit;
  if (await heldBySome(pagefind, unit)) return unit;
  const limit = word.length >= 8 ? 2 : 1;
  // The fewest edits away, then the most alike, then the first in order, as the server picks
  // ("cutlas": cutlass before cublas).
  let best = null, bestKey = [limit + 1, 0];
  for (const candidate of vocabulary.words) {
    const key = [editDistance(word, candidate, limit), -likeness(word, candidate)];
    if (key[0] <= limit && (key[0] < bestKey[0] || (key[0] === bestKey[0] && key[1] < bestKey[1]))) {
      best = candidate; bestKey = key;
    }
  }
  return best ? { ...unit, words: [best] } : { ...unit, heldByNone: true };
}

async function heldBySome(pagefind, unit) {
  // Whether a page holds the unit (one of its first 20 pages by Pagefind, by the page's words):
  // else its word is corrected (`spelt`), and it is a word no talk holds (the server's `held_by_none`).
  const first = (await pages(pagefind, unit.words.join(" "))).slice(0, 20);
  await Promise.all(first.map((r) => textOf(r.id)));
  return first.some((r) => holds(fields.get(r.id).words, unit) || holds(fields.get(r.id).fileWords, unit));
}

async function looked(pagefind, unit, vocabulary, widen) {
  // What Pagefind gives for each form of the unit (its words, their other ways of writing and, when
  // the unit is widened, its concept's terms, each form once): its best pages, id -> score; and the
  // pages of the unit's topics. And the unit's phrases as the served search scores them: each word
  // and each other way of writing (`literal`), and when widened its topics among the labels and
  // its terms too (`phrases`), each with the number of pages holding it.
  const terms = widen ? ((unit.concept && vocabulary.terms[unit.concept]) || []).map(tokens) : [];
  const forms = [...new Map([unit.words, ...unit.same, ...terms].map((words) => [words.join(" "), words])).values()];
  const searched = await Promise.all(forms.map((words) => pages(pagefind, words.join(" "))));
  const found = searched.map((results) => new Map(results.slice(0, CANDIDATES).map((r) => [r.id, r.score])));
  // Held by few pages, a phrase counts in a lecture's folder's file names too (the server's `matched`).
  const isRare = (df) => df * vocabulary.rare <= vocabulary.stats.talks;
  const phrase = (words, df, labelsOnly = false) => ({ words: words.map(stem), df, labelsOnly, rare: isRare(df) });
  const searchedFor = (words) => searched[forms.findIndex((form) => form.join(" ") === words.join(" "))];
  const wordsAlone = unit.words.length > 1
    ? await Promise.all(unit.words.map(async (word) => phrase([word], (await pages(pagefind, word)).length)))
    : [phrase(unit.words, searched[0].length)];
  // Each way of writing counted once, as the server's `other_forms`: none the index holds as the
  // unit's own words or an earlier way ("noyaux": "kernel", not "kernels" too), nor a term either holds.
  const stems = (words) => words.map(stem).join(" ");
  const own = new Set([stems(unit.words)]);
  const others = unit.same.filter((words) => !own.has(stems(words)) && own.add(stems(words)));
  const literal = [...wordsAlone, ...others.map((words) => phrase(words, searchedFor(words).length))];
  const phrases = [...literal];
  // A topic's talks: those whose labels name it, found by its name's words (a Pagefind filter over
  // thousands of pages took 3.6 s at 100k talks); how many there are comes with the vocabulary.
  const topical = new Map(), topicNames = [];
  const topics = widen ? [...unit.topics, ...((unit.concept && vocabulary.topics[unit.concept]) || [])] : [];
  for (const topic of new Set(topics)) {
    const members = (await pages(pagefind, topic)).slice(0, CANDIDATES);
    members.forEach((r) => topical.set(r.id, (topical.get(r.id) || 0) + r.score));
    const name = phrase(tokens(topic), vocabulary.topicTalks[topic] || members.length, true);
    topicNames.push(name.words);
    phrases.push(name);
  }
  terms.filter((words) => !own.has(stems(words)))
    .forEach((words) => phrases.push(phrase(words, searchedFor(words).length)));
  const held = [unit.words, ...unit.same].reduce((n, words) => n + (searchedFor(words) || []).length, 0);
  return { forms, found, topical, topicNames, literal, phrases, common: isCommon(unit, vocabulary), rare: isRare(held) };
}

// Held by more than half the talks (one of its ways of writing is, every word of it), a unit
// counts for nothing in how much of the query a page holds, as on the server (bm25 gives it no
// weight): "gpu" in an index of GPU talks. The served index's counts: Pagefind's own stemming
// finds 3 pages for "gpus", 127 for "gpu".
const isCommon = (unit, vocabulary) => [unit.words, ...unit.same]
  .some((words) => words.every((word) => vocabulary.common.has(stem(word))));

function narrowing(content, vocabulary) {
  // The units naming topics or a concept that "related topic" requires, as the server's
  // `narrowing`: a broad one (topics.toml `broad`) only when no other unit tells pages apart.
  // A word that is a broad thing's own term (a broad concept's term, an alias naming only broad
  // topics) is as broad: "kernels" in "cuda kernels for beginners".
  const broad = (u) => {
    const names = [...u.topics, ...(u.concept ? [u.concept] : [])];
    if (!names.length) return [u.words, ...u.same].some((words) => vocabulary.broadWords.has(words.map(stem).join(" ")));
    return names.every((name) => vocabulary.broad.has(name));
  };
  const named = content.filter((u) => u.topics.length || u.concept);
  // A unit no page holds tells no pages apart ("warp shuffles": the warp pages are all there is).
  return content.some((u) => !broad(u) && !isCommon(u, vocabulary) && !u.heldByNone) ? named.filter((u) => !broad(u)) : named;
}

async function phraseWords(pagefind, named, vocabulary) {
  // The words of the named units' phrases, each alone, that "related topic" counts, as the server's
  // `phrase_words`: not stop words, words no page or most pages hold, nor a term of the unit's concept.
  const found = new Map();
  for (const u of named) {
    const terms = new Set(((u.concept && vocabulary.terms[u.concept]) || []).flatMap((term) => tokens(term).map(stem)));
    for (const form of [u.words, ...u.same]) {
      if (form.length < 2) continue;
      form.filter((w) => !vocabulary.stop.has(w) && !terms.has(stem(w)) && !vocabulary.common.has(stem(w)))
        .forEach((w) => found.set(stem(w), w));
    }
  }
  const phrases = await Promise.all([...found.values()].map(async (w) => ({ words: [stem(w)], df: (await pages(pagefind, w)).length })));
  return phrases.filter((phrase) => phrase.df).map((phrase) => ({ ...phrase, rare: phrase.df * vocabulary.rare <= vocabulary.stats.talks }));
}

function holdsUnit(id, page, { forms, found, topicNames }) {
  // Whether a page holds a unit: one of its topics among its labels, or one of its forms among
  // Pagefind's pages for it (Pagefind matches loosely, prefixes and typos: the page must hold the
  // form's words).
  return topicNames.some((name) => holdsRun(page.labels, name))
    || forms.some((words, n) => found[n].has(id) && holdsWords(page.words, words));
}

export async function search(pagefind, query, vocabulary, limit = 50) {
  const content = await Promise.all(units(query, vocabulary).map((u) => spelt(pagefind, u, vocabulary)));
  if (!content.length) return [];
  // Past MOST_WORDS words (a pasted sentence) the words are taken as typed, as on the server.
  const named = content.length <= MOST_WORDS ? narrowing(content, vocabulary) : [];
  const pagesOf = await Promise.all(content.map((u) => looked(pagefind, u, vocabulary, named.includes(u))));
  // The pages read to decide the tiers: the best by Pagefind's scores, summed over the query's units.
  const rough = new Map();
  const add = (scores) => scores.forEach((s, id) => rough.set(id, (rough.get(id) || 0) + s));
  pagesOf.forEach(({ found, topical }) => { found.forEach(add); add(topical); });
  const need = named.length >= 3 && named.length <= MOST_WORDS ? named.length - 1 : named.length;
  const candidates = [...rough].sort((a, b) => b[1] - a[1]).slice(0, CANDIDATES).map(([id]) => id);
  await Promise.all(candidates.map(textOf));  // each candidate's fields, read together
  // The units naming topics, their own or their concept's ("hopper", "optimize": profiling).
  const topical = content.filter((u) => u.topics.length
    || (u.concept && (vocabulary.topics[u.concept] || []).length));
  const telling = content.filter((u, n) => !pagesOf[n].common);
  // Each tier scored as the server scores it: on the reader's words as typed in "all" and "most of
  // your words"; in the others on the named units widened and the other words as typed. The SQL
  // of "related topic" names each widened unit more than once (once a set of all named units but
  // one, and again beside the other words) and bm25 counts each time: so does this.
  const typed = pagesOf.flatMap((p) => p.literal);
  const widenedTimes = (weight) => pagesOf.flatMap((p, u) => (named.includes(content[u])
    ? p.phrases.map((phrase) => ({ ...phrase, weight })) : p.literal));
  const some = widenedTimes(1);
  const alone = await phraseWords(pagefind, named, vocabulary);
  const related = [...widenedTimes((need < named.length ? need : 1) * (named.length < content.length || alone.length ? 2 : 1)),
                   ...alone];
  const ranked = [];
  for (const id of candidates) {
    const page = fields.get(id);
    // Whether the page holds a unit: in its own text, or a rare one in its folder's file names too.
    const holdsIn = (u) => holds(page.words, u) || (pagesOf[content.indexOf(u)].rare && holds(page.fileWords, u));
    const held = content.filter(holdsIn).length;
    // How much of the query it holds, for "most" and the order of "some of your words": the units
    // that tell pages apart (not the common ones).
    const counted = telling.filter(holdsIn).length;
    const namedHeld = named.filter((u) => holdsUnit(id, page, pagesOf[content.indexOf(u)])).length;
    let tier = 3;
    if (held === content.length) tier = 0;
    else if (telling.length >= 3 && telling.length <= MOST_WORDS && counted === telling.length - 1) tier = 1;
    else if (named.length && namedHeld >= need) tier = 2;
    // Pagefind's loose match: none of the words; or, as on the server, only words most pages hold
    // ("sql on gpus": "gpu"), when the query has others.
    else if (!(telling.length ? counted : held) && !namedHeld) continue;
    const best = bm25(page, tier <= 1 ? typed : tier === 2 ? related : some, vocabulary.stats);
    // What of the query the page holds, as the server's gputalks_held counts it: each unit that
    // tells pages apart, as typed or by one of its topics among the page's labels; and when the
    // query names two topics or more, which of them.
    const holdsTopic = (u) => holdsIn(u)
      || pagesOf[content.indexOf(u)].topicNames.some((name) => holdsRun(page.labels, name));
    const unitsHeld = telling.filter(holdsTopic).length;
    const topicsHeld = topical.length >= 2 ? topical.filter(holdsTopic).map((u) => content.indexOf(u)) : [];
    // As on the server, how much of the query a page holds orders "some of your words" only.
    // Of "all your words", the talks whose title holds them first, the shortest title first.
    const titled = tier === 0 && content.every((u) => holds(page.titleWords, u)) ? page.titleLength : Infinity;
    ranked.push({ result: known.get(id), tier, titled, held: tier === 3 ? unitsHeld : 0, best,
                  key: `${unitsHeld} ${topicsHeld}` });
  }
  const first = (a, b) => a.tier - b.tier || (a.titled === b.titled ? 0 : a.titled < b.titled ? -1 : 1);
  ranked.sort((a, b) => first(a, b) || b.held - a.held || b.best - a.best);
  // Of "some of your words" holding as many, one of each set of topics held in turn ("cutlass and triton").
  const turns = new Map();
  for (const r of ranked) {
    r.turn = r.tier === 3 ? (turns.get(r.key) || 0) + 1 : 0;
    turns.set(r.key, r.turn);
  }
  ranked.sort((a, b) => first(a, b) || b.held - a.held || a.turn - b.turn || b.best - a.best);
  // The phrases an excerpt marks: the words and terms of the query in a talk's own text.
  const marked = some.filter((phrase) => !phrase.labelsOnly).map((phrase) => phrase.words);
  // As the server's `knows_all`: a word naming nothing that no page holds, and "related topic"
  // is no answer to the query ("kubernetes deployment"): its pages say "some of your words".
  const plain = ranked.some((r) => r.tier === 2) ? content.filter((u) => !u.topics.length && !u.concept) : [];
  const knowsAll = (await Promise.all(plain.map((u) => heldBySome(pagefind, u)))).every(Boolean);
  return ranked.slice(0, limit).map((r) => ({ ...r, tier: r.tier === 2 && !knowsAll ? 3 : r.tier, marked }));
}

// The passage of a page's description (its text from word `from` on: Pagefind's location of the
// description's anchor) that holds the most of the query's phrases (`marked`, each its words'
// stems), those marked, as the served excerpt shows it: [{ text, mark }], a piece a word.
export function passage(content, marked, from = 0, size = 16) {
  const words = (content || "").split(/\s+/).filter(Boolean).slice(from);
  const stems = [], wordOf = [];  // the description's stems in order, and the word each is in
  words.forEach((word, n) => tokens(word).forEach((token) => { stems.push(stem(token)); wordOf.push(n); }));
  const hits = words.map(() => 0);
  for (const phrase of marked) {
    for (const at of runs(stems, phrase)) phrase.forEach((_, n) => { hits[wordOf[at + n]] = 1; });
  }
  let best = 0, count = 0, bestCount = -1;
  for (let n = 0; n < words.length; n++) {
    count += hits[n] - (n >= size ? hits[n - size] : 0);
    if (count > bestCount) { bestCount = count; best = Math.max(n - size + 1, 0); }
  }
  const pieces = words.slice(best, best + size).map((word, n) => ({ text: word, mark: Boolean(hits[best + n]) }));
  if (best > 0) pieces.unshift({ text: "…", mark: false });
  if (best + size < words.length) pieces.push({ text: "…", mark: false });
  return pieces;
}

export async function pageData(id) {
  return known.get(id).data();
}

export { MATCHES };
