"""Translation front doors and the text handling around the model."""
