// The page that translates in the browser: the exported model (./model/: onnx/*.onnx, tokenizer.json, configs) in
// transformers.js, with the package's own way with text (text.js): invisible characters removed, every line sentence
// by sentence, a sentence too long for the model cut into pieces, the pieces joined as the target language writes
// them, English output cased. Greedy decoding; the translation grows token by token. What fails is said on the page
// (index.html's showFailure), with what to do.
import { AutoModelForSeq2SeqLM, AutoTokenizer, TextStreamer, env } from './vendor/transformers.min.js';
import { cased, join, segments, textCleaning } from './text.js';

env.allowRemoteModels = false; // nothing from the Hub or a CDN: the page's own files only
env.allowLocalModels = true;
env.localModelPath = './';
// A page written again over a broken or older model must not keep loading the old files: none kept by
// transformers.js, and each checked with the server (which answers "not modified" when it is the same).
env.useBrowserCache = false;
env.fetch = (url, options) => fetch(url, { cache: 'no-cache', ...options });
env.backends.onnx.wasm.wasmPaths = {
  mjs: './vendor/ort-wasm-simd-threaded.asyncify.mjs',
  wasm: './vendor/ort-wasm-simd-threaded.asyncify.wasm',
};
env.backends.onnx.wasm.numThreads = 1; // several threads need a cross-origin isolated page, which a plain server is not

const MODEL_FILES = ['config.json', 'generation_config.json', 'tokenizer.json', 'tokenizer_config.json'];
const GRAPHS = ['encoder_model', 'decoder_model_merged'];
const EXPORT_AGAIN =
  'Export the model again (tiny-transformer export-onnx), then write this page again (tiny-transformer browser-page).';
const { showFailure } = window; // index.html's
const status = document.getElementById('status');
const button = document.getElementById('translate');
const source = document.getElementById('source');
const output = document.getElementById('translation');

async function json(path) {
  const response = await env.fetch(path);
  if (!response.ok) throw new Error(`${path}: ${response.status}`);
  return response.json();
}

/** transformers.js's suffix of the graphs' file names for `dtype`. */
function graphSuffix(dtype) {
  return { fp32: '', q8: '_quantized' }[dtype] ?? `_${dtype}`;
}

/** The embedding table both graphs read (onnx/embeddings*.onnx_data, where the export stores it once), fetched once
 *  and handed to both sessions; none for an export that keeps a copy in each graph. */
async function sharedEmbeddings(dtype) {
  const name = `embeddings${graphSuffix(dtype)}.onnx_data`;
  const response = await env.fetch(`./model/onnx/${name}`);
  if (!response.ok) return {};
  return { session_options: { externalData: [{ path: name, data: new Uint8Array(await response.arrayBuffer()) }] } };
}

/** The model, its tokenizer, its text cleaning (the one its tokenizer.json starts with) and settings, and the
 *  seconds they took to load. */
async function loadModel(dtype) {
  const started = performance.now();
  const [settings, config, tokenizerJson] = await Promise.all(
    ['generation_config.json', 'config.json', 'tokenizer.json'].map((name) => json(`./model/${name}`)),
  );
  const tokenizer = await AutoTokenizer.from_pretrained('model');
  const options = { dtype, device: 'wasm', ...(await sharedEmbeddings(dtype)) };
  const model = await AutoModelForSeq2SeqLM.from_pretrained('model', options);
  const clean = textCleaning(tokenizerJson);
  return { settings, config, tokenizer, clean, model, seconds: (performance.now() - started) / 1000 };
}

/** What is wrong with the model's files: the first one missing, not JSON, or not a whole ONNX file; null when each
 *  looks whole. The graphs are those transformers.js loads for `dtype`. */
async function modelFileProblem(dtype) {
  const suffix = graphSuffix(dtype);
  const paths = [...MODEL_FILES, ...GRAPHS.map((graph) => `onnx/${graph}${suffix}.onnx`)].map((name) => `model/${name}`);
  for (const path of paths) {
    const response = await env.fetch(path);
    if (!response.ok) return `${path} is missing (HTTP ${response.status}).`;
    const bytes = new Uint8Array(await response.arrayBuffer());
    const kind = path.endsWith('.onnx') ? 'ONNX' : 'JSON';
    if (!(kind === 'ONNX' ? isWholeOnnx(bytes) : isJson(bytes))) {
      return `${path} is not a whole ${kind} file (cut short, or another kind of file).`;
    }
  }
  return null;
}

function isJson(bytes) {
  try {
    JSON.parse(new TextDecoder().decode(bytes));
    return true;
  } catch {
    return false;
  }
}

/** True when `bytes` read as protobuf fields to their last byte (an ONNX file cut short does not) and hold a graph
 *  (ONNX's ModelProto field 7). */
function isWholeOnnx(bytes) {
  let at = 0;
  let graph = false;
  const varint = () => {
    let value = 0;
    for (let shift = 0; at < bytes.length && shift < 64; shift += 7) {
      const byte = bytes[at++];
      value += (byte & 0x7f) * 2 ** shift;
      if (byte < 0x80) return value;
    }
    return -1;
  };
  while (at < bytes.length) {
    const tag = varint();
    const wireType = tag % 8;
    if (wireType === 0) {
      if (varint() < 0) return false;
    } else if (wireType === 1 || wireType === 5) {
      at += wireType === 1 ? 8 : 4;
    } else if (wireType === 2) {
      const length = varint();
      if (length < 0) return false;
      at += length;
      graph ||= Math.floor(tag / 8) === 7;
    } else {
      return false; // not a field (or a negative tag: bytes ran out)
    }
  }
  return at === bytes.length && graph;
}

/** One piece translated greedily, `onToken(text so far)` at every new token; the longest translation is what the
 *  Python translators allow: 2 x its tokens + 10, at most the positional table. */
async function translatePiece(page, piece, onToken) {
  const { tokenizer, model, config } = page;
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

/** A text translated piece by piece (text.js's segments); `onPartial(text)` as it grows. */
async function translate(page, text, onPartial) {
  const { tokenizer, clean, config, sourceLang, targetLang } = page;
  const countTokens = (piece) => tokenizer(piece).input_ids.dims[1];
  const pieces = segments(text, sourceLang, countTokens, config.max_position_embeddings, clean);
  const done = [];
  let tokens = 0;
  for (const piece of pieces) {
    const shown = pieces.slice(0, done.length + 1);
    const result = await translatePiece(page, piece.text, (partial) => onPartial(join([...done, partial], shown, targetLang)));
    done.push(result.text);
    tokens += result.tokens;
  }
  return { text: cased(join(done, pieces, targetLang), targetLang, page.settings.english_casing), tokens };
}

window.translationUpdates = []; // what the translation showed as it grew (for tests, and the curious)

async function onTranslate(page) {
  button.disabled = true;
  delete document.body.dataset.error;
  status.className = '';
  status.textContent = 'Translating…';
  output.dataset.final = 'false';
  window.translationUpdates = [];
  const start = performance.now();
  try {
    const result = await translate(page, source.value, (partial) => {
      output.textContent = partial;
      window.translationUpdates.push(partial);
    });
    const seconds = (performance.now() - start) / 1000;
    output.textContent = result.text;
    output.dataset.final = 'true';
    output.dataset.seconds = String(seconds);
    output.dataset.tokens = String(result.tokens);
    status.textContent = `${result.tokens} tokens in ${seconds.toFixed(2)} s (${(result.tokens / seconds).toFixed(0)} tokens/s), model ${page.dtype}, loaded in ${page.seconds.toFixed(1)} s.`;
  } catch (error) {
    console.error(error);
    showFailure('translation', `The translation failed: ${error?.message ?? error}. Try again, or a shorter text.`);
  } finally {
    button.disabled = false;
  }
}

async function start() {
  if (location.protocol === 'file:') return; // index.html has said to serve the folder; nothing here would load
  const quantized = (await env.fetch('./model/onnx/encoder_model_quantized.onnx', { method: 'HEAD' })).ok;
  const dtype = new URLSearchParams(location.search).get('dtype') ?? (quantized ? 'q8' : 'fp32');
  let page;
  try {
    page = { ...(await loadModel(dtype)), dtype };
  } catch (error) {
    console.error(error);
    const problem = (await modelFileProblem(dtype).catch(() => null)) ?? `The model did not load: ${error?.message ?? error}.`;
    showFailure('model', `${problem} ${EXPORT_AGAIN}`);
    return;
  }
  page.sourceLang = page.settings.source_lang ?? 'en';
  page.targetLang = page.settings.target_lang ?? 'ja';
  document.getElementById('languages').textContent = `${page.sourceLang} -> ${page.targetLang}`;
  output.lang = page.targetLang;
  button.addEventListener('click', () => onTranslate(page));
  button.disabled = false;
  document.body.dataset.ready = 'true';
  document.body.dataset.loadSeconds = String(page.seconds);
  status.textContent = `Ready: model ${dtype}, loaded in ${page.seconds.toFixed(1)} s.`;
}

await start();
