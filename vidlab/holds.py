"""Test seams that hold a running command at a known point, so that a test interrupts or kills it in that state.

A seam is a hold-file variable and, where the point is counted, a position variable. :func:`hold_at` waits while
the hold file exists, at the seam's position: ``HOLD_AFTER`` (both variables set), or its start (a seam with no
position variable). A test that kills the command from outside does so after exactly that many items or steps,
never in a race with the ones that follow (on a fast machine a small run can finish between two polls). Unset, it
returns at once.

============  ====================================================  ==========================================
seam          variables                                             where it holds
============  ====================================================  ==========================================
``JOB``       ``VIDLAB_JOB_HOLD_FILE``, ``VIDLAB_JOB_HOLD_AFTER``   the local job backend, before that item
``GRPO``      ``VIDLAB_GRPO_HOLD_FILE``, ``VIDLAB_GRPO_HOLD_AFTER`` toy-world GRPO, before that step
``PIPELINE``  ``VIDLAB_PIPELINE_HOLD_FILE``                         the index pipeline's encoder, before its
                                                                    first batch
============  ====================================================  ==========================================

The seams are apart so that holding one stage of a chained command (GRPO after its classify job) never holds
another.
"""

from __future__ import annotations

import os
import time

__all__ = ["GRPO", "JOB", "PIPELINE", "hold_at"]

JOB = ("VIDLAB_JOB_HOLD_FILE", "VIDLAB_JOB_HOLD_AFTER")
GRPO = ("VIDLAB_GRPO_HOLD_FILE", "VIDLAB_GRPO_HOLD_AFTER")
PIPELINE = ("VIDLAB_PIPELINE_HOLD_FILE", None)  # held at its start (position 0)


def hold_at(seam: tuple[str, str | None], n: int) -> None:
    """Wait while ``seam``'s hold file exists, when ``n`` is its held position (a signal ends the wait)."""
    file_var, after_var = seam
    hold = os.environ.get(file_var)
    after = os.environ.get(after_var) if after_var else "0"
    if hold and after and after.isdigit() and n == int(after):
        while os.path.exists(hold):
            time.sleep(0.05)
