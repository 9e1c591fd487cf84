"""The Gradio demo (``vidlab demo``): ``vidlab.demos.app.build_demo(config) -> gr.Blocks``."""

if (
    __name__ == "demos"
):  # the old top-level name, imported from a checkout: the alias (one warning) takes over
    from vidlab._areas import alias_old_name

    alias_old_name(__name__)
