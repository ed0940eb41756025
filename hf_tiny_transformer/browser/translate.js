// The page that translates in the browser: the exported model (./model/: onnx/*.onnx, tokenizer.json, configs) in
// transformers.js, with the package's own way with text: every line sentence by sentence, the pieces joined as the
// target language writes them, English output cased. Greedy decoding; the translation grows token by token.
import { AutoModelForSeq2SeqLM, AutoTokenizer, TextStreamer, env } from './vendor/transformers.min.js';

env.allowRemoteModels = false; // nothing from the Hub or a CDN: the page's own files only
env.allowLocalModels = true;
env.localModelPath = './';
env.backends.onnx.wasm.wasmPaths = {
  mjs: './vendor/ort-wasm-simd-threaded.asyncify.mjs',
  wasm: './vendor/ort-wasm-simd-threaded.asyncify.wasm',
};
env.backends.onnx.wasm.numThreads = 1; // several threads need a cross-origin isolated page, which a plain server is not

const UNSPACED = new Set(['ja', 'zh']); // written without spaces between sentences
const status = document.getElementById('status');
const button = document.getElementById('translate');
const source = document.getElementById('source');
const output = document.getElementById('translation');

async function json(path) {
  const response = await fetch(path);
  if (!response.ok) throw new Error(`${path}: ${response.status}`);
  return response.json();
}

/** The sentences of one line, as Intl.Segmenter finds them, without their surrounding spaces. */
function sentences(line, lang) {
  const segmenter = new Intl.Segmenter(lang, { granularity: 'sentence' });
  return [...segmenter.segment(line)].map((part) => part.segment.trim()).filter((part) => part.length > 0);
}

/** English casing of lowercased output: each sentence's first letter and the pronoun I (text_tiny_transformer). */
function englishCasing(text) {
  const notEnds = new Set(['e.g.', 'i.e.', 'mr.', 'mrs.', 'ms.', 'dr.', 'vs.', 'a.m.', 'p.m.']);
  const starts = /(?:^|([.!?])["'”’)\]]*\s+)[\s"'“‘([]*(\p{L})/gmu;
  const cased = text.replace(starts, (match, end, letter, offset) => {
    if (end !== undefined) {
      const word = text.slice(0, offset + match.indexOf(end) + 1).split(/\s+/).pop().replace(/^["'“‘([]+/, '').toLowerCase();
      if (notEnds.has(word) || word.endsWith('..')) return match;
    }
    return match.slice(0, match.length - letter.length) + letter.toUpperCase();
  });
  return cased.replace(/\bi\b(?![.\-]\w)/g, 'I');
}

const [settings, config] = await Promise.all([json('./model/generation_config.json'), json('./model/config.json')]);
const sourceLang = settings.source_lang ?? 'en';
const targetLang = settings.target_lang ?? 'ja';
const casing = settings.english_casing ?? targetLang === 'en';
const quantized = (await fetch('./model/onnx/encoder_model_quantized.onnx', { method: 'HEAD' })).ok;
const dtype = new URLSearchParams(location.search).get('dtype') ?? (quantized ? 'q8' : 'fp32');
document.getElementById('languages').textContent = `${sourceLang} -> ${targetLang}`;
output.lang = targetLang;

const started = performance.now();
const tokenizer = await AutoTokenizer.from_pretrained('model');
const model = await AutoModelForSeq2SeqLM.from_pretrained('model', { dtype, device: 'wasm' });
const loaded = performance.now() - started;

/** One piece translated greedily, `onToken(text so far)` at every new token; the longest translation is what the
 *  Python translators allow: 2 x its tokens + 10, at most the positional table. */
async function translatePiece(piece, onToken) {
  const inputs = tokenizer(piece);
  const length = inputs.input_ids.dims[1];
  let sofar = '';
  const streamer = new TextStreamer(tokenizer, {
    skip_special_tokens: true,
    callback_function: (text) => onToken((sofar += text)),
  });
  const limit = Math.min(config.max_position_embeddings, Math.ceil(2 * length + 10));
  const ids = await model.generate({ ...inputs, max_new_tokens: limit, num_beams: 1, do_sample: false, streamer });
  return { text: tokenizer.decode(ids[0], { skip_special_tokens: true }).trim(), tokens: ids.dims[1] - 1 };
}

/** A text translated line by line, each line sentence by sentence; `onPartial(text)` as it grows. */
async function translate(text, onPartial) {
  const space = UNSPACED.has(targetLang.split('-')[0]) ? '' : ' ';
  const lines = [];
  let tokens = 0;
  const show = (pieces) => onPartial([...lines, pieces.join(space)].join('\n'));
  for (const line of text.split('\n')) {
    const pieces = [];
    for (const piece of sentences(line, sourceLang)) {
      const done = await translatePiece(piece, (partial) => show([...pieces, partial.trim()]));
      pieces.push(done.text);
      tokens += done.tokens;
    }
    lines.push(pieces.join(space));
  }
  const joined = lines.join('\n');
  return { text: casing ? englishCasing(joined) : joined, tokens };
}

window.translationUpdates = []; // what the translation showed as it grew (for tests, and the curious)

async function onTranslate() {
  button.disabled = true;
  status.textContent = 'Translating…';
  output.dataset.final = 'false';
  window.translationUpdates = [];
  const start = performance.now();
  const result = await translate(source.value, (partial) => {
    output.textContent = partial;
    window.translationUpdates.push(partial);
  });
  const seconds = (performance.now() - start) / 1000;
  output.textContent = result.text;
  output.dataset.final = 'true';
  output.dataset.seconds = String(seconds);
  output.dataset.tokens = String(result.tokens);
  status.textContent = `${result.tokens} tokens in ${seconds.toFixed(2)} s (${(result.tokens / seconds).toFixed(0)} tokens/s), model ${dtype}, loaded in ${(loaded / 1000).toFixed(1)} s.`;
  button.disabled = false;
}

button.addEventListener('click', onTranslate);
button.disabled = false;
document.body.dataset.ready = 'true';
document.body.dataset.loadSeconds = String(loaded / 1000);
status.textContent = `Ready: model ${dtype}, loaded in ${(loaded / 1000).toFixed(1)} s.`;
