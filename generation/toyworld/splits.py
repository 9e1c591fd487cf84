"""Fixed prompt splits: test and validation multi-subject captions, never seen in training.

A seeded permutation of every relation caption and every count caption picks ``TEST_RELATIONS`` + ``TEST_COUNTS``
test prompts and ``VAL_RELATIONS`` + ``VAL_COUNTS`` validation prompts; ``held_out_captions()`` is their union,
which training removes. The single-subject prompts (``single_prompts``) are training captions by design: the
check there is that Comp-Attn does not hurt what the model already does.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from vidlab.generation.toyworld.world import all_captions

SPLIT_SEED = 12
TEST_RELATIONS, TEST_COUNTS = 188, 12
VAL_RELATIONS, VAL_COUNTS = 36, 4


@lru_cache(maxsize=1)
def _splits() -> dict[str, tuple[str, ...]]:
    rng = np.random.default_rng(SPLIT_SEED)
    rel = all_captions("relation")
    cnt = all_captions("count")
    rel = [rel[i] for i in rng.permutation(len(rel))]
    cnt = [cnt[i] for i in rng.permutation(len(cnt))]
    return {
        "test": tuple(rel[:TEST_RELATIONS] + cnt[:TEST_COUNTS]),
        "val": tuple(
            rel[TEST_RELATIONS : TEST_RELATIONS + VAL_RELATIONS] + cnt[TEST_COUNTS : TEST_COUNTS + VAL_COUNTS]
        ),
    }


def test_prompts() -> list[str]:
    """The held-out multi-subject test prompts (relations first, then counts)."""
    return list(_splits()["test"])


def val_prompts() -> list[str]:
    """The validation prompts for sweeps (disjoint from the test prompts)."""
    return list(_splits()["val"])


def held_out_captions() -> frozenset[str]:
    s = _splits()
    return frozenset(s["test"] + s["val"])


def single_prompts() -> list[str]:
    """Single-subject prompts: every "a <colour> <shape>" caption."""
    return all_captions("single")
