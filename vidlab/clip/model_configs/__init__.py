"""JSON configs of vidlab's built-in CLIP models (registered with open_clip.add_model_config)."""
