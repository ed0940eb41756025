"""Serving: one translator interface for both engines (transformers, CTranslate2), and the CTranslate2 export."""
