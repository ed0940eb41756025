"""One translator interface for every engine: texts in, translations out, as the pipeline gives them.

    from hf_tiny_transformer.serving.engines import load_translator
    translator = load_translator("runs/en-ja/hub")                       # transformers
    translator = load_translator("runs/en-ja/ct2-int8", engine="ctranslate2")
    translator.translate(["I like cats.", "I like books."], num_beams=4)  # ["...", "..."]
    translator("I like green tea.")                                       # [{"translation_text": "..."}]

Both engines handle texts the same way (`text_tiny_transformer`): a text longer than the model takes is translated
sentence by sentence, English output is cased, bad settings are a ValueError. The pieces are translated in batches
of similar length (the least padding), each allowed `translation_length_limit` new tokens; decoding settings not
given come from the model's generation config (`tune_decoding.py` chooses them on dev data).
"""

import collections
import contextlib
import math
import threading
import time
from collections.abc import Callable, Iterator

from tqdm.auto import tqdm

from ..text_tiny_transformer import (
    generation_settings,
    guess_language,
    put_together,
    remove_invisible_characters,
    segments,
    texts_of,
    translate_in_pieces,
)

# The longest translation generated for a source of n tokens: LENGTH_RATIO n + LENGTH_OFFSET (fairseq's max_len_a and
# max_len_b), capped by the positional table.
LENGTH_RATIO, LENGTH_OFFSET = 2.0, 10


def translation_length_limit(source_length: int, max_positions: int) -> int:
    """How many new tokens a source of `source_length` tokens may get: LENGTH_RATIO x + LENGTH_OFFSET, at most
    what the model's positional table (`max_positions` rows) holds."""
    return min(max_positions, math.ceil(LENGTH_RATIO * source_length + LENGTH_OFFSET))


def generation_limit(longest_source: int, max_positions: int, max_new_tokens: int | None) -> int:
    """New tokens a batch whose longest source has `longest_source` tokens may get: translation_length_limit, or
    `max_new_tokens` when that is lower."""
    limit = translation_length_limit(longest_source, max_positions)
    return min(limit, max_new_tokens) if max_new_tokens else limit


def within_own_limits(rows: list, batch: list[list[int]], max_positions: int, max_new_tokens: int | None, start: int):
    """Each output row (`start` tokens, then the new ones) cut to the new tokens its own source may get: a batch
    decodes to the limit of its longest source, and a sentence's translation must not depend on the sentences
    batched with it (greedy decoding gives the tokens of the sentence alone)."""
    return [
        row[: start + generation_limit(len(ids), max_positions, max_new_tokens)]
        for row, ids in zip(rows, batch, strict=True)
    ]


def in_length_batches(
    lengths: list[int], batch_size: int, submit_batch: Callable, progress: bool, in_flight: int = 1
) -> list[str]:
    """Translations of inputs of the given lengths, in the inputs' order, made in batches of `batch_size` inputs of
    similar length. `submit_batch(indices)` starts translating those inputs and returns a function that gives their
    translations; up to `in_flight` batches are started before the oldest is waited for (an engine that translates
    in the background then never waits for the next batch). `progress`: a bar over the sentences on a terminal (none
    when stderr is a file)."""
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    translations = [""] * len(lengths)
    pending = collections.deque()
    # no bar made at all without progress: a call a sentence would pay for it
    bar = (
        tqdm(total=len(lengths), unit=" sentences", desc="translating", disable=None, leave=False) if progress else None
    )
    with bar if bar is not None else contextlib.nullcontext():

        def finish_oldest():
            indices, result = pending.popleft()
            for index, text in zip(indices, result()):
                translations[index] = text
            if bar is not None:
                bar.update(len(indices))

        for start in range(0, len(order), batch_size):
            indices = order[start : start + batch_size]
            pending.append((indices, submit_batch(indices)))
            if len(pending) >= in_flight:
                finish_oldest()
        while pending:
            finish_oldest()
    return translations


class TokenIds:
    """Token ids of texts, each text encoded once: the texts given first in one call to the tokenizer, any other on
    first use. Counting a text's tokens, cutting it into sentences and encoding the sentences would otherwise encode
    each sentence up to three times, one call each, which costs more than a fast engine takes to translate it."""

    def __init__(self, tokenizer, texts: list[str]):
        self.tokenizer = tokenizer
        self.known = dict(zip(texts, tokenizer(texts, verbose=False)["input_ids"])) if texts else {}

    def __getitem__(self, text: str) -> list[int]:
        if text not in self.known:  # verbose=False: counting a long text is no reason for a length warning
            self.known[text] = self.tokenizer(text, verbose=False)["input_ids"]
        return self.known[text]

    def within(self, text: str, max_length: int) -> list[int]:
        """The ids of `text`, truncated to `max_length` as the tokenizer truncates (its last token kept)."""
        ids = self[text]
        if len(ids) <= max_length:
            return ids
        return self.tokenizer(text, truncation=True, max_length=max_length)["input_ids"]


class DoesNotFit(ValueError):
    """Decoding settings whose states would not fit in the device's memory (`num_beams ... does not fit ...`)."""


def hypothesis_bytes(vocab_size: int, max_positions: int, decoder_layers: int, d_model: int) -> int:
    """What one hypothesis of beam search holds at its longest, in float32: the keys and values of every decoder
    layer's self- and cross-attention over `max_positions` positions, and three vocabulary-sized rows of scores."""
    return 4 * (4 * decoder_layers * max_positions * d_model + 3 * vocab_size)


class Translator:
    """Texts -> translations for one model; an engine subclass implements `translate_ids`.

    Attributes:
        tokenizer: the model's tokenizer; generation_config: its decoding settings (beams, length penalty, and
        source_lang / target_lang / english_casing when training wrote them); max_positions: the longest input.
    """

    in_flight = 1  # batches started before the oldest is waited for (in_length_batches)

    def __init__(self, tokenizer, generation_config, max_positions: int, hypothesis_bytes: int, device: str = "cpu"):
        self.tokenizer, self.generation_config, self.max_positions = tokenizer, generation_config, max_positions
        self.hypothesis_bytes, self.device = hypothesis_bytes, device
        self.free_bytes, self.free_read_at = 0, -math.inf

    def free_memory(self) -> int:
        """The device's free memory (hardware.free_memory), read again at most once a second: a call a sentence
        would otherwise read it for every sentence."""
        from ..hardware import free_memory

        if time.monotonic() - self.free_read_at > 1:
            self.free_bytes, self.free_read_at = free_memory(self.device), time.monotonic()
        return self.free_bytes

    def check_fits(self, num_beams: int | None, batch_size: int):
        """A DoesNotFit error naming the largest beam count that fits, when `batch_size` sentences with `num_beams`
        beams would need more memory than the device has free (a search of a billion beams would otherwise end in
        an out-of-memory crash)."""
        beams = self.decoding(num_beams, None)[0]
        need, free = batch_size * beams * self.hypothesis_bytes, self.free_memory()
        if need > free:
            largest = free // (batch_size * self.hypothesis_bytes)
            sentences = f"{batch_size} sentence{'s' * (batch_size != 1)}"
            raise DoesNotFit(
                f"num_beams {beams} does not fit in memory: {sentences} x {beams} beams need about "
                f"{need / 2**30:,.1f} GiB and {self.device} has {free / 2**30:,.1f} GiB free; at most {largest:,} "
                f"beams fit at batch size {batch_size} (lower the beams or the batch size)"
            )

    def __call__(self, text: str | list[str], **settings) -> list[dict[str, str]]:
        """TranslationPipeline's shape: one `{"translation_text": ...}` per text."""
        return [{"translation_text": translation} for translation in self.translate(texts_of(text), **settings)]

    def translate(
        self,
        texts: list[str],
        *,
        batch_size: int = 32,
        num_beams: int | None = None,
        length_penalty: float | None = None,
        max_new_tokens: int | None = None,
        progress: bool = False,
    ) -> list[str]:
        """Translate `texts` in their order, whole or sentence by sentence (see the module's docstring)."""
        settings = generation_settings(
            num_beams=num_beams, length_penalty=length_penalty, max_new_tokens=max_new_tokens
        )
        batch_size = generation_settings(batch_size=batch_size)["batch_size"]
        config = self.generation_config
        texts = texts_of(texts)
        token_ids = TokenIds(self.tokenizer, [remove_invisible_characters(text) for text in texts])

        def translate_pieces(pieces: list[str]) -> list[list[str]]:
            self.check_fits(settings.get("num_beams"), min(batch_size, len(pieces)))
            encoded = [token_ids.within(piece, self.max_positions) for piece in pieces]
            lengths = [len(ids) for ids in encoded]
            submit = lambda indices: self.submit_ids([encoded[i] for i in indices], **settings)  # noqa: E731
            translations = in_length_batches(lengths, batch_size, submit, progress, self.in_flight)
            return [[text] for text in translations]

        results = translate_in_pieces(
            texts,
            translate_pieces,
            lambda text: len(token_ids[text]),
            self.max_positions,
            source_lang=getattr(config, "source_lang", None),
            target_lang=getattr(config, "target_lang", None),
            casing=getattr(config, "english_casing", None),
        )
        return [sequences[0] for sequences in results]

    def translate_ids(
        self,
        batch: list[list[int]],
        num_beams: int | None = None,
        length_penalty: float | None = None,
        max_new_tokens: int | None = None,
    ) -> list[str]:
        """The decoded translations of a batch of token id lists."""
        raise NotImplementedError

    def submit_ids(self, batch: list[list[int]], **settings) -> Callable[[], list[str]]:
        """Start translating a batch (as `translate_ids`); returns a function that gives the translations. An
        engine that translates in the background (`in_flight` above 1) returns before they are done."""
        translations = self.translate_ids(batch, **settings)
        return lambda: translations

    def decoding(self, num_beams: int | None, length_penalty: float | None) -> tuple[int, float]:
        """Beams and length penalty: the given ones, else the generation config's, else 1 and 1.0."""
        beams = num_beams or self.generation_config.num_beams or 1
        penalty = next(v for v in (length_penalty, self.generation_config.length_penalty, 1.0) if v is not None)
        return beams, penalty


class TransformersTranslator(Translator):
    """A transformers model and its tokenizer."""

    def __init__(self, model, tokenizer):
        config = model.config
        size = hypothesis_bytes(
            config.vocab_size, config.max_position_embeddings, config.decoder_layers, config.d_model
        )
        super().__init__(tokenizer, model.generation_config, config.max_position_embeddings, size, str(model.device))
        self.model = model.eval()

    def translate_ids(self, batch, num_beams=None, length_penalty=None, max_new_tokens=None) -> list[str]:
        import torch

        inputs = self.tokenizer.pad({"input_ids": batch}, return_tensors="pt").to(self.model.device)
        limit = generation_limit(inputs["input_ids"].shape[1], self.max_positions, max_new_tokens)
        beams, penalty = self.decoding(num_beams, length_penalty)
        with torch.inference_mode():
            # an encoder-decoder's output starts with the one start token: max_length = limit + 1, said as
            # max_length so that it replaces the saved generation config's max_length instead of clashing
            output = self.model.generate(**inputs, max_length=limit + 1, num_beams=beams, length_penalty=penalty)
        rows = within_own_limits(output.tolist(), batch, self.max_positions, max_new_tokens, start=1)
        return self.tokenizer.batch_decode(rows, skip_special_tokens=True)

    def plan(self, text: str) -> list:
        """The pieces (text_tiny_transformer.segments) this translator cuts one text into, as `stream` does."""
        count = lambda piece: len(self.tokenizer(piece, verbose=False)["input_ids"])  # noqa: E731
        source_lang = getattr(self.generation_config, "source_lang", None) or guess_language(text)
        return segments(text, source_lang, count, self.max_positions)

    def stream(
        self,
        text: str,
        *,
        num_beams: int | None = None,
        length_penalty: float | None = None,
        max_new_tokens: int | None = None,
    ) -> Iterator[str]:
        """The translation of one text as it grows: the text so far after every new token (greedy decoding, one
        sentence after the other, each put together as `translate` does), the last one the translation itself.
        Beam search keeps its hypotheses to the end: with beams, only the final translation."""
        from transformers import TextIteratorStreamer

        settings = generation_settings(
            num_beams=num_beams, length_penalty=length_penalty, max_new_tokens=max_new_tokens
        )
        if self.decoding(settings.get("num_beams"), None)[0] > 1:
            yield self.translate([text], **settings)[0]
            return
        config = self.generation_config
        target_lang, casing = getattr(config, "target_lang", None), getattr(config, "english_casing", None)
        plan = self.plan(text)
        done: list[str] = []
        for segment in plan:
            inputs = self.tokenizer([segment.text], truncation=True, max_length=self.max_positions, return_tensors="pt")
            limit = generation_limit(inputs["input_ids"].shape[1], self.max_positions, settings.get("max_new_tokens"))
            streamer = TextIteratorStreamer(self.tokenizer, skip_prompt=True, skip_special_tokens=True)
            failed: list[BaseException] = []
            arguments = {**inputs.to(self.model.device), "max_length": limit + 1, "num_beams": 1}
            worker = threading.Thread(target=self.generate, args=(streamer, failed), kwargs=arguments)
            worker.start()
            partial = ""
            for new in streamer:
                partial += new
                yield put_together([*done, partial], plan[: len(done) + 1], target_lang, casing)
            worker.join()
            if failed:  # the generating thread's error, raised here, where the caller waits
                raise failed[0]
            done.append(partial.strip())
        yield put_together(done, plan, target_lang, casing) if plan else ""

    def generate(self, streamer, failed: list, **arguments):
        """generate() into `streamer`, on a thread of its own; an error ends the stream (else the reader would wait
        for ever) and is kept in `failed` for the reader to raise."""
        import torch

        try:
            with torch.inference_mode():
                self.model.generate(**arguments, streamer=streamer)
        except BaseException as error:
            failed.append(error)
            streamer.end()


__all__ = [
    "DoesNotFit",
    "TokenIds",
    "hypothesis_bytes",
    "Translator",
    "TransformersTranslator",
    "translation_length_limit",
    "generation_limit",
    "in_length_batches",
]
