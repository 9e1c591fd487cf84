"""The Gradio demo (``vidlab demo``): ``demos.app.build_demo(config) -> gr.Blocks``."""
