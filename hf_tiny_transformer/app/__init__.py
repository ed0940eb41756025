"""The demo page (a Gradio app) and the pictures of the model's attention and positional encoding."""
