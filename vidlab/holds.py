"""Test seams that hold a running command at a known item, so that a test kills it in that state.

Each seam is a pair of variables; with both set, :func:`hold_at` waits at position ``HOLD_AFTER`` while the file
``HOLD_FILE`` exists. A test that kills the command from outside does so after exactly that many items or steps,
never in a race with the ones that follow (on a fast machine a small run can finish between two polls). Unset, it
returns at once.

========  ==============================================  ==================================================
seam      variables                                       where it holds
========  ==============================================  ==================================================
``JOB``   ``VIDLAB_JOB_HOLD_FILE``, ``VIDLAB_JOB_HOLD_AFTER``    the local job backend, before that item of a run
``GRPO``  ``VIDLAB_GRPO_HOLD_FILE``, ``VIDLAB_GRPO_HOLD_AFTER``  toy-world GRPO, before that step
========  ==============================================  ==================================================

The seams are apart so that holding one stage of a chained command (GRPO after its classify job) never holds
another.
"""

from __future__ import annotations

import os
import time

__all__ = ["GRPO", "JOB", "hold_at"]

JOB = ("VIDLAB_JOB_HOLD_FILE", "VIDLAB_JOB_HOLD_AFTER")
GRPO = ("VIDLAB_GRPO_HOLD_FILE", "VIDLAB_GRPO_HOLD_AFTER")


def hold_at(seam: tuple[str, str], n: int) -> None:
    """Wait while ``seam``'s hold file exists, when ``n`` is its held position (a signal ends the wait)."""
    hold, after = (os.environ.get(name) for name in seam)
    if hold and after and after.isdigit() and n == int(after):
        while os.path.exists(hold):
            time.sleep(0.05)
