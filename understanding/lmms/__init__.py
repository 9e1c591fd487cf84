"""VideoBrain inside lmms-eval: a model plug-in that answers each question with the VideoBrain episode loop.

Registered through lmms-eval's own mechanism, the ``lmms_eval.models`` entry-point group (declared in
vidlab's pyproject), so after ``pip install -e ".[lmms]"``::

    lmms-eval --model videobrain --model_args policy=toy:where,clip_model=understanding/toyworld/weights/where/clip \\
        --tasks videomme --batch_size 1

runs any vidlab policy (``policy=`` takes every ``--policy`` spec, including plug-ins from the
``vidlab.policies`` group) through the real ``Episode`` with ``uniform_sample`` and, when ``clip_model=`` is
given, ``clip_sample`` over the cached frame index. This module stays light: lmms-eval imports it to read
the manifest; the model class lives in :mod:`vidlab.understanding.lmms.model`.
"""

from __future__ import annotations

from typing import Any

MODEL_ID = "videobrain"
MODEL_CLASS = "vidlab.understanding.lmms.model.VideoBrainLMM"


def manifest() -> Any:
    """The ``lmms_eval.models`` entry point's payload: one simple (non-chat) model, ``videobrain``."""
    from lmms_eval.models.registry_v2 import ModelManifest

    return ModelManifest(model_id=MODEL_ID, simple_class_path=MODEL_CLASS, aliases=("video_brain",))
