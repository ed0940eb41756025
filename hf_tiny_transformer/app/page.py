"""The app: a Gradio page that translates a typed sentence and shows, for that sentence, the attention of every
layer and head and the positional encoding (the pictures of `visualization`), in the Hub Spaces convention.

    app = build_app(model, tokenizer)          # the page; `tiny-transformer app` serves it (commands/app.py)
    tiny-transformer app --model runs/demo/hub                                   # http://127.0.0.1:7860
    tiny-transformer app --model runs/demo/hub --screenshot docs/app.png    # page -> PNG, exit

Needs the `[app]` extra (gradio; the pictures need `[viz]`). `save_for_hub(..., space_folder=...)` writes a folder to
upload as a Hub Space that runs this app on the model saved with it. `--screenshot` drives the page in headless
Chromium (Debian's chromium and chromium-driver, and selenium): it types an example, presses Translate, waits for the
translation and the heatmap, and saves what the browser shows.
"""

import io
import time
from pathlib import Path

from ..serving.browser import chromium
from ..serving.translator import TransformersTranslator
from ..text_tiny_transformer import guess_language
from .visualization import KINDS, TITLES, attention_weights, draw_heads, plot_positional_encoding

EXAMPLES = {
    "en": [
        "My mother really likes green tea.",
        "I didn't eat bread.",
        "The students bought a car.",
        "She reads books.",
    ],
    "ja": [
        "私は緑茶がとても好きです。",
        "彼はパンを食べませんでした。",
        "学生たちは車を買いました。",
        "彼女は本を読みます。",
    ],
}


def gradio():
    """The gradio module, or an ImportError that says how to install it."""
    try:
        import gradio
    except ImportError as error:
        raise ImportError("The app needs gradio: pip install 'hf-tiny-transformer[app,viz]'.") from error
    return gradio


def picture(figure):
    """A matplotlib figure as a PIL image (what gradio's Image component shows)."""
    from PIL import Image

    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=80)
    buffer.seek(0)
    return Image.open(buffer)


class TranslationApp:
    """A model and its tokenizer (or several, one a source language: `others`), and what the page asks of them; a
    text goes to the model of its language (by its script), else to the first."""

    def __init__(self, model, tokenizer, others=()):
        self.translators = [
            TransformersTranslator(model.eval(), tokenizer) for model, tokenizer in [(model, tokenizer), *others]
        ]

    def translator(self, source: str) -> TransformersTranslator:
        language = guess_language(source)
        return next(
            (t for t in self.translators if getattr(t.generation_config, "source_lang", None) == language),
            self.translators[0],
        )

    def translate_and_draw(self, source: str, kind: str, layer: int):
        """The translation of `source` (sentence by sentence, as every front door does), every head of `kind`
        attention in `layer` for its first piece as a picture, and a note when the text was split. A generator, as
        gradio streams one: the translation as it grows, token by token (greedy decoding; with beams, the final
        one), then the translation with the picture and the note."""
        if not self.pieces(source):  # nothing but whitespace and invisible characters
            yield "", None, ""
            return
        translation = ""
        for translation in self.translator(source).stream(source):
            yield translation, None, ""
        yield (translation, *self.heatmap_and_note(source, translation, kind, layer))

    def heatmap_and_note(self, source: str, translation: str, kind: str, layer: int):
        """The picture of `kind` attention in `layer` for the first piece of `source` and its translation (as the
        model reads it, teacher-forced), and a note when the text was split."""
        pieces, translator = self.pieces(source), self.translator(source)
        note = ""
        if len(pieces) > 1:
            note = (
                f"The text was translated in {len(pieces)} pieces, sentence by sentence, as the model was trained "
                f"(at most {translator.max_positions} tokens at once). The heatmap shows the first piece."
            )
        first = translation if len(pieces) == 1 else translator.translate([pieces[0]])[0]
        attention = attention_weights(translator.model, translator.tokenizer, pieces[0], target=first)
        layer = min(int(layer), len(attention.weights(kind)) - 1)
        heads = list(range(attention.weights(kind)[layer].shape[0]))
        return picture(draw_heads(attention, kind, layer, heads)), note

    def pieces(self, source: str) -> list[str]:
        """The pieces the translator cuts `source` into."""
        return [segment.text for segment in self.translator(source).plan(source)]

    def positional_encoding(self):
        return picture(plot_positional_encoding(self.translators[0].model.config))


def build_app(model, tokenizer, examples: list[str] | None = None, others=()):
    """The page as a gradio Blocks app, for a model of any shape (and `others`, one a source language, see
    TranslationApp); `examples` are sentences to click."""
    gr = gradio()
    translation_app = TranslationApp(model, tokenizer, others)
    layers = max(max(m.config.encoder_layers, m.config.decoder_layers) for m, _ in [(model, tokenizer), *others])
    with gr.Blocks(title="hf-tiny-transformer") as page:
        gr.Markdown(
            "# Attention Is All You Need, small enough to read\n"
            "Type a sentence: the model translates it, and the heatmaps show where each head of the chosen layer "
            "looks (rows: queries, columns: keys). Cross-attention shows which source token each target token was "
            "predicted from; the decoder's self-attention shows the causal mask as the empty upper triangle."
        )
        with gr.Row():
            source = gr.Textbox(label="Sentence", lines=2, elem_id="source")
            translation = gr.Textbox(label="Translation", lines=2, interactive=False, elem_id="translation")
        note = gr.Markdown(elem_id="note")
        with gr.Row():
            kind = gr.Radio(
                list(KINDS), value="cross", label="Attention", info=", ".join(f"{k}: {TITLES[k]}" for k in KINDS)
            )
            # a slider needs two ends: a model of one layer per stack gets a hidden one at 0
            layer = gr.Slider(0, max(layers - 1, 1), value=layers - 1, step=1, label="Layer", visible=layers > 1)
        button = gr.Button("Translate", variant="primary", elem_id="translate")
        heatmap = gr.Image(label="Attention of every head", type="pil", elem_id="heatmap")
        gr.Examples(examples or [], inputs=source)
        with gr.Accordion("Positional encoding", open=False):
            gr.Image(value=translation_app.positional_encoding(), label="PE(pos, i)", type="pil", elem_id="positional")
        inputs, outputs = [source, kind, layer], [translation, heatmap, note]
        button.click(translation_app.translate_and_draw, inputs, outputs, api_name="translate")
        source.submit(translation_app.translate_and_draw, inputs, outputs)
        kind.change(translation_app.translate_and_draw, inputs, outputs)
        layer.release(translation_app.translate_and_draw, inputs, outputs)
    return page


def use_in_browser(url: str, sentence: str, screenshot: str | Path | None = None, timeout: float = 120) -> str:
    """Open the page in headless Chromium, type `sentence`, press Translate, and wait until the translation and the
    heatmap are shown; return the translation, and save the page as a PNG when `screenshot` is given."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    driver = chromium()
    try:
        driver.get(url)
        wait = WebDriverWait(driver, timeout)
        box = wait.until(expected_conditions.element_to_be_clickable((By.CSS_SELECTOR, "#source textarea")))
        box.send_keys(sentence)
        driver.find_element(By.CSS_SELECTOR, "#translate").click()
        output = (By.CSS_SELECTOR, "#translation textarea")
        wait.until(lambda d: d.find_element(*output).get_attribute("value"))
        wait.until(expected_conditions.presence_of_element_located((By.CSS_SELECTOR, "#heatmap img")))
        time.sleep(1)  # let the image finish drawing
        if screenshot:
            driver.save_screenshot(str(screenshot))
        return driver.find_element(*output).get_attribute("value")
    finally:
        driver.quit()


def examples_for(model, folder: str) -> list[str]:
    """Example sentences in the model's source language: its generation config's, or its model card's metadata."""
    language = getattr(model.generation_config, "source_lang", None)
    card = Path(folder) / "README.md"
    if language is None and card.is_file():
        from huggingface_hub import ModelCard

        language = next(iter(ModelCard.load(card).data.language or []), None)
    return EXAMPLES.get(language, EXAMPLES["en"])
