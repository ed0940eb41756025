"""A translation pipeline: transformers 5.x removed its own, so the model ships this one.

    from hf_tiny_transformer import TranslationPipeline
    translate = TranslationPipeline(model=model, tokenizer=tokenizer)
    translate("I really like green tea.")              # [{"translation_text": "私は緑茶が好きです。"}]
    translate(["I like cats.", "I like books."], num_beams=4, batch_size=2)

From a saved folder (the file travels with it, and config.json names it in `custom_pipelines`):

    pipeline("translation", model=folder, trust_remote_code=True)
"""

import logging

import torch
from transformers import Pipeline

logger = logging.getLogger(__name__)

PIPELINE_TASK = "translation"


class TranslationPipeline(Pipeline):
    """Text in the source language -> `[{"translation_text": ...}]`; a list of texts -> one such dict per text.

    Generation parameters (`num_beams`, `max_new_tokens`, `do_sample`, ...) go to `model.generate()`, given when
    the pipeline is made or at each call. An empty text translates to an empty text. A text longer than the
    model's `max_position_embeddings` tokens is cut to that length, with a warning.
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

    def __call__(self, text: str | list[str], **kwargs):
        """Translate one text or a list of texts."""
        texts = [text] if isinstance(text, str) else text
        if not isinstance(texts, (list, tuple)) or not all(isinstance(item, str) for item in texts):
            raise TypeError(f"text must be a string or a list of strings, got {type(text).__name__}: {text!r:.80}")
        to_translate = [item for item in texts if item.strip()]
        translated = iter(super().__call__(to_translate, **kwargs) if to_translate else [])
        results = [next(translated) if item.strip() else [{"translation_text": ""}] for item in texts]
        if isinstance(text, str):
            return results[0]
        return [result[0] if len(result) == 1 else result for result in results]

    def preprocess(self, text: str) -> dict[str, torch.Tensor]:
        input_ids = self.tokenizer(text)["input_ids"]
        longest = self.model.config.max_position_embeddings
        if len(input_ids) > longest:
            logger.warning(
                "The input has %d tokens but the model takes at most %d; translating only its first %d tokens.",
                len(input_ids),
                longest,
                longest - 1,
            )
            input_ids = input_ids[: longest - 1] + [self.tokenizer.eos_token_id]
        input_ids = torch.tensor([input_ids])
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
