"""vidlab's shared layer: video I/O, CLIP models and frame index, Ray executor, config, CLI.

Heavy submodules (torch, open_clip, ray) are imported lazily by the modules that need them.
"""

__version__ = "0.2.0"
