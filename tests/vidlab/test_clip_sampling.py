"""Sampling specs: parsing, canonical strings (cache keys), frame selection, bad specs."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from vidlab.clip import Sampling, SamplingError


def test_parse_forms_and_canonical_spec():
    assert Sampling.parse("fps=1") == Sampling.fps(1.0)
    assert Sampling.parse(" every=30 ").spec == "every=30"
    assert Sampling.parse("indices=9,0,5,5").frames == (0, 5, 9)
    assert Sampling.parse("fps=0.50").spec == "fps=0.5"
    long = Sampling.indices(range(0, 1000, 3))
    assert long.spec.startswith("indices#334:") and len(long.spec) < 40


@pytest.mark.parametrize(
    "bad", ["fps=0", "fps=-1", "every=0", "every=1.5", "indices=", "indices=a", "rate=3", "fps"]
)
def test_bad_specs_are_typed_errors(bad):
    with pytest.raises(SamplingError):
        Sampling.parse(bad)


def test_frame_selection():
    np.testing.assert_array_equal(Sampling.every(10).frame_indices(35, 30.0), [0, 10, 20, 30])
    np.testing.assert_array_equal(Sampling.fps(1).frame_indices(90, 30.0), [0, 30, 60])
    np.testing.assert_array_equal(Sampling.fps(2).frame_indices(60, 25.0), [0, 12, 25, 38, 50])
    with pytest.raises(SamplingError, match="up to 99"):
        Sampling.indices([1, 99]).frame_indices(50, 25.0)


@given(
    n=st.integers(min_value=1, max_value=5000),
    fps=st.floats(min_value=1.0, max_value=120.0),
    rate=st.floats(min_value=0.05, max_value=60.0),
)
def test_fps_grid_is_sorted_unique_in_range_and_near_rate(n, fps, rate):
    idx = Sampling.fps(rate).frame_indices(n, fps)
    assert idx.dtype == np.int64 and idx[0] == 0 and idx[-1] < n
    assert np.all(np.diff(idx) > 0)
    expected = min(n, np.ceil(n / fps * rate))
    assert abs(idx.size - expected) <= max(1, 0.02 * expected)
