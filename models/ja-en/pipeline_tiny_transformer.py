"""A translation pipeline: transformers 5.x removed its own, so the model ships this one.

    from hf_tiny_transformer import TranslationPipeline
    translate = TranslationPipeline(model=model, tokenizer=tokenizer)
    translate("I really like green tea.")              # [{"translation_text": "私は緑茶が好きです。"}]
    translate(["I like cats.", "I like books."], num_beams=4, batch_size=2)

From a saved folder (the file travels with it, and config.json names it in `custom_pipelines`):

    pipeline("translation", model=folder, trust_remote_code=True)
"""

from collections.abc import Iterable

import torch
from transformers import Pipeline

from .text_tiny_transformer import generation_settings, texts_of, translate_in_pieces

PIPELINE_TASK = "translation"


class TranslationPipeline(Pipeline):
    """Text in the source language -> `[{"translation_text": ...}]`; a list of texts -> one such dict per text.

    Generation parameters (`num_beams`, `max_new_tokens`, `do_sample`, ...) go to `model.generate()`, given when
    the pipeline is made or at each call; nonsensical beams, lengths or length penalties are a ValueError. A text is
    translated line by line, and a line longer than the model's `max_position_embeddings` tokens sentence by
    sentence (with a warning), as every front door of the package does (text_tiny_transformer.py); English output
    is cased unless the generation config says `english_casing: false`. An empty text translates to "".
    """

    _pipeline_calls_generate = True
    _load_tokenizer = True
    _load_processor = False
    _load_image_processor = False
    _load_feature_extractor = False

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # pipeline("translation", config=model.config, ...) replaces the model class names of the config's
        # custom_pipelines by the classes themselves, in place; put the names back so that the config stays JSON.
        for task in (getattr(self.model.config, "custom_pipelines", None) or {}).values():
            task["pt"] = [getattr(model_class, "__name__", model_class) for model_class in task.get("pt", ())]

    def _sanitize_parameters(self, **generate_kwargs):
        return {}, generate_kwargs, {}

    def __call__(self, text: str | list[str] | Iterable[str], **kwargs):
        """Translate one text or a list of texts; or, as transformers' pipelines take them, the texts of any other
        iterable (a generator, a dataset's column): then the translations come one text at a time, as a generator."""
        if not isinstance(text, (str, bytes, list, tuple)) and isinstance(text, Iterable):
            return (self(item, **kwargs) for item in text)
        texts = texts_of(text)
        generation_settings(**{name: kwargs.get(name) for name in ("num_beams", "length_penalty", "max_new_tokens")})
        config = self.model.generation_config

        def translate_pieces(pieces: list[str]) -> list[list[str]]:
            results = Pipeline.__call__(self, pieces, **kwargs)
            return [[output["translation_text"] for output in result] for result in results]

        translations = translate_in_pieces(
            texts,
            translate_pieces,
            lambda piece: len(self.tokenizer(piece, verbose=False)["input_ids"]),  # counted, never truncated
            self.model.config.max_position_embeddings,
            source_lang=getattr(config, "source_lang", None),
            target_lang=getattr(config, "target_lang", None),
            casing=getattr(config, "english_casing", None),
        )
        results = [[{"translation_text": sequence} for sequence in sequences] for sequences in translations]
        if isinstance(text, str):
            return results[0]
        return [result[0] if len(result) == 1 else result for result in results]

    def preprocess(self, text: str) -> dict[str, torch.Tensor]:
        input_ids = self.tokenizer(text, truncation=True, max_length=self.model.config.max_position_embeddings)
        input_ids = torch.tensor([input_ids["input_ids"]])
        return {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids)}

    def _forward(self, model_inputs: dict[str, torch.Tensor], **generate_kwargs) -> dict[str, torch.Tensor]:
        batch_size = model_inputs["input_ids"].shape[0]
        output_ids = self.model.generate(**model_inputs, **self._prepare_generate_kwargs(generate_kwargs))
        return {"output_ids": output_ids.reshape(batch_size, -1, output_ids.shape[-1])}  # (B, sequences, T)

    def postprocess(self, model_outputs: dict[str, torch.Tensor]) -> list[dict[str, str]]:
        return [
            {"translation_text": self.tokenizer.decode(ids, skip_special_tokens=True)}
            for ids in model_outputs["output_ids"][0]
        ]


__all__ = ["TranslationPipeline", "PIPELINE_TASK"]
