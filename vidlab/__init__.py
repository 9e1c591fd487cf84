"""vidlab's shared layer: video I/O, CLIP models and frame index, Ray executor, config, CLI.

The areas install beneath it: ``vidlab.generation`` (Comp-Attn), ``vidlab.understanding`` (VideoBrain),
``vidlab.demos`` (the Gradio app). Heavy submodules (torch, open_clip, ray) are imported lazily by the modules
that need them.
"""

from vidlab._areas import install_checkout_finder as _install_checkout_finder

__version__ = "0.2.0"

_install_checkout_finder()  # vidlab.<area> from a checkout that is not installed (PYTHONPATH, demos/app.py)
