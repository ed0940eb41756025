// Text around the model, in the page, as the package's front doors handle it (text_tiny_transformer.py): invisible
// characters removed, every line translated sentence by sentence, a sentence too long for the model cut into pieces,
// the pieces joined as the target language writes them, English output cased. No DOM here, so that the tests run
// these functions under Node beside the Python ones. Lengths are counted in code points, as Python counts them, so
// that a cut never falls inside an emoji.

const OPENING = '「『（【〈《';
const CLOSING = '」』）】〉》';
// Where a too-long sentence is best cut: after a clause mark (a half-width one only before a space, so 1,000 stays
// whole), else after a space.
const CLAUSE_BREAK = /[,;]\s+|[，、；：。！？]\s*/gu;
const SPACE_BREAK = /\s+/gu;
const UNSPACED_LANGUAGES = new Set(['ja', 'zh']); // written without spaces between sentences
const NOT_SENTENCE_ENDS = new Set(['e.g.', 'i.e.', 'mr.', 'mrs.', 'ms.', 'dr.', 'vs.', 'a.m.', 'p.m.']);
// A sentence start: the start of a line, or . ! ? (and closing quotes) then whitespace; then opening quotes, a letter.
const SENTENCE_START = /(?:^|([.!?])["'”’)\]]*\s+)[\s"'“‘([]*(\p{L})/gmu;

/** The cleaning that the normalizer of `tokenizerJson` (a parsed tokenizer.json) starts with, as a function of a
 *  text: its leading Replace steps, which data/tokenizer.py writes from text_tiny_transformer.py's patterns (invisible
 *  characters removed, blanks that are not spaces made spaces). Read from the model's own file, so that the page
 *  cleans as the tokenizer and the Python front doors do; compiled with the u flag, as transformers.js compiles them.
 *  A tokenizer.json without such steps cleans nothing. */
export function textCleaning(tokenizerJson) {
  const normalizer = tokenizerJson.normalizer;
  const steps = normalizer?.type === 'Sequence' ? normalizer.normalizers : [normalizer];
  const replaces = [];
  for (const step of steps) {
    if (step?.type !== 'Replace') break;
    const { Regex: regex, String: string } = step.pattern;
    replaces.push({ pattern: regex === undefined ? string : new RegExp(regex, 'gu'), content: step.content });
  }
  return (text) => replaces.reduce((cleaned, { pattern, content }) => cleaned.replaceAll(pattern, content), text);
}

/** The sentences of `text` as Intl.Segmenter finds them, each with its trailing whitespace; a sentence never ends
 *  inside Japanese brackets, nor at a closing bracket that the sentence goes on after (「行きます。」と言った。). */
export function sentences(text, lang) {
  const segmenter = new Intl.Segmenter(lang, { granularity: 'sentence' });
  const merged = [];
  for (const { segment } of segmenter.segment(text)) {
    const previous = merged.at(-1);
    if (previous !== undefined && (bracketDepth(previous) > 0 || continuesAfterBracket(previous, segment))) {
      merged[merged.length - 1] += segment;
    } else {
      merged.push(segment);
    }
  }
  return merged;
}

/** Japanese brackets opened in `text` and not closed yet. */
function bracketDepth(text) {
  let depth = 0;
  for (const char of text) depth += OPENING.includes(char) - CLOSING.includes(char);
  return depth;
}

/** True when `previous` ends at a closing bracket and `piece` goes straight on. */
function continuesAfterBracket(previous, piece) {
  return CLOSING.includes(previous.at(-1)) && !/^\s/u.test(piece) && !OPENING.includes(piece[0]);
}

/** Consecutive pieces of `sentence` of at most `maxTokens` tokens each (`countTokens(text)`), which joined give it
 *  back: a cut goes after the last clause mark if it is in the second half of what fits, else after the last clause
 *  mark or space, and only as a last resort between characters; a character over the limit is a piece of its own. */
export function hardSplit(sentence, countTokens, maxTokens) {
  const pieces = [];
  let rest = sentence;
  while (rest && countTokens(rest) > maxTokens) {
    const fitting = longestFittingPrefix(rest, countTokens, maxTokens);
    const piece = fitting ? fitting.slice(0, bestCut(fitting)) : String.fromCodePoint(rest.codePointAt(0));
    pieces.push(piece);
    rest = rest.slice(piece.length);
  }
  return rest ? [...pieces, rest] : pieces;
}

/** The longest prefix of `text` with at most `maxTokens` tokens, by binary search over its code points. */
function longestFittingPrefix(text, countTokens, maxTokens) {
  const chars = [...text];
  let low = 0; // chars[:low] fits, chars[:high + 1] does not (or is past the end)
  let high = chars.length;
  while (low < high) {
    const middle = Math.floor((low + high + 1) / 2);
    if (countTokens(chars.slice(0, middle).join('')) <= maxTokens) low = middle;
    else high = middle - 1;
  }
  return chars.slice(0, low).join('');
}

/** Where to end a piece within `prefix`, in UTF-16 units (see hardSplit); its length when there is no better place. */
function bestCut(prefix) {
  const lastEnd = (pattern) => Math.max(0, ...[...prefix.matchAll(pattern)].map((m) => m.index + m[0].length));
  const clause = lastEnd(CLAUSE_BREAK);
  const space = lastEnd(SPACE_BREAK);
  const codePoints = (end) => [...prefix.slice(0, end)].length;
  if (codePoints(clause) > Math.floor(codePoints(prefix.length) / 2)) return clause;
  return Math.max(clause, space) || prefix.length;
}

/** The pieces of `text` to translate, each `{ text, lineBreaks }` (line breaks between the previous piece and this
 *  one: 0 on the same line, 2 after a blank line): cleaned first (`clean`, what textCleaning gave), the sentences of
 *  each line, a sentence longer than `maxTokens` tokens cut further; whitespace around lines and pieces dropped. */
export function segments(text, lang, countTokens, maxTokens, clean) {
  const result = [];
  let lineBreaks = 0;
  for (const line of clean(text).split('\n')) {
    for (const piece of linePieces(line.trim(), lang, countTokens, maxTokens)) {
      result.push({ text: piece, lineBreaks: result.length ? lineBreaks : 0 });
      lineBreaks = 0;
    }
    lineBreaks += 1;
  }
  return result;
}

/** The pieces of one stripped line, stripped, none empty. */
function linePieces(line, lang, countTokens, maxTokens) {
  if (!line) return [];
  const pieces = sentences(line, lang).flatMap((sentence) => hardSplit(sentence, countTokens, maxTokens));
  return pieces.map((piece) => piece.trim()).filter((piece) => piece.length > 0);
}

/** The translations of `pieces` (what `segments` gave) put back together: pieces of one line joined by a space (by
 *  nothing for Japanese and Chinese), lines by the source's line breaks. */
export function join(translations, pieces, targetLang) {
  const space = UNSPACED_LANGUAGES.has(targetLang.split('-')[0].toLowerCase()) ? '' : ' ';
  return translations
    .map((translation, i) => {
      const before = i === 0 ? '' : pieces[i].lineBreaks ? '\n'.repeat(pieces[i].lineBreaks) : space;
      return before + translation.trim();
    })
    .join('');
}

/** English casing of lowercased output: each sentence's first letter and the pronoun I. */
export function englishCasing(text) {
  const cased = text.replace(SENTENCE_START, (match, end, letter, offset) => {
    if (end !== undefined) {
      const word = text.slice(0, offset + match.indexOf(end) + 1).split(/\s+/).pop().replace(/^["'“‘([]+/, '').toLowerCase();
      if (NOT_SENTENCE_ENDS.has(word) || word.endsWith('..')) return match;
    }
    return match.slice(0, match.length - letter.length) + letter.toUpperCase();
  });
  return cased.replace(/\bi\b(?![.\-]\w)/g, 'I');
}

/** `englishCasing(text)` when `casing` is true, or when it is undefined and `targetLang` is English. */
export function cased(text, targetLang, casing) {
  return (casing ?? targetLang === 'en') ? englishCasing(text) : text;
}
