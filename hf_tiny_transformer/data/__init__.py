"""Data: corpora as natural text, text files, the tokenizer trainer, batches by tokens."""
