"""The page of `tiny-transformer app` (Gradio) and the pictures of the model's attention and positional encoding."""
