"""Odd index maps and exposure tables reaching didmem.orders' public functions (issue 50's
fifth-wave probe): each either gives the exposures of the clean data or is refused in one
line naming the map or the column, never a silently lost exposure or a garbage step."""

import numpy as np
import pandas as pd
import pytest

from didmem.errors import ParameterError
from didmem.orders import exposure_cohorts, exposure_frame, exposure_steps
from didmem.orders.neox import (IndexMaps, read_index_maps, sequence_spans, span_exposures,
                                write_index_maps)
from didmem.orders.neox_kernels import lookup_filter, positions_of_samples

L = 16
SIZES = np.random.default_rng(5).integers(2, 40, 60).astype(np.int32)
EVERY_DOCUMENT = np.arange(SIZES.size)


@pytest.fixture
def maps(tmp_path):
    return write_index_maps(tmp_path / "ds", SIZES, 40, L, 7)


def _hand_built(maps, **replace):
    arrays = {name: np.asarray(getattr(maps, name)).copy()
              for name in ("doc_idx", "sample_idx", "shuffle_idx")}
    arrays.update(replace)
    return IndexMaps(**arrays, files={})


def _holding_sample(maps):
    """A sample that holds some document whole, and its position in the shuffle."""
    clean = span_exposures(maps, SIZES, EVERY_DOCUMENT, batch_size=4)
    position = int(clean["position"].iloc[0])
    return int(maps.shuffle_idx[position]), position


def test_a_shuffle_that_loses_a_trained_sample_is_refused(maps):
    # before: the exposure of every instance in the lost sample vanished silently
    sample, position = _holding_sample(maps)
    shuffle = np.asarray(maps.shuffle_idx).astype(np.int64).copy()
    shuffle[position] = 10**9  # outside the samples: the sample is at no position
    with pytest.raises(ParameterError, match=f"shuffle_idx.*sample {sample} at no position"):
        span_exposures(_hand_built(maps, shuffle_idx=shuffle), SIZES, EVERY_DOCUMENT, 4)


def test_a_shuffle_that_repeats_a_trained_sample_is_refused(tmp_path, maps):
    sample, position = _holding_sample(maps)
    shuffle = np.asarray(maps.shuffle_idx).copy()
    other = (position + 1) % shuffle.size
    shuffle[other] = sample  # the sample twice, the one it replaced never
    np.save(maps.files["shuffle_idx"], shuffle)
    unchecked = read_index_maps(maps.files["doc_idx"], check_values=False)
    with pytest.raises(ParameterError, match="not a permutation.*sample"):
        span_exposures(unchecked, SIZES, EVERY_DOCUMENT, 4)


def test_unchecked_sample_rows_outside_doc_idx_are_refused(maps):
    rows = np.asarray(maps.sample_idx).copy()
    rows[-1, 0] = 10**6
    with pytest.raises(ParameterError, match="sample_idx.*position 1000000 of doc_idx"):
        span_exposures(_hand_built(maps, sample_idx=rows), SIZES, EVERY_DOCUMENT, 4)


def test_positions_must_be_the_maps_training_positions(maps):
    with pytest.raises(ParameterError, match="positions must be maps.training_positions"):
        span_exposures(maps, SIZES, EVERY_DOCUMENT, 4,
                       positions=maps.training_positions()[:3])
    same = span_exposures(maps, SIZES, EVERY_DOCUMENT, 4,
                          positions=maps.training_positions())
    pd.testing.assert_frame_equal(same, span_exposures(maps, SIZES, EVERY_DOCUMENT, 4))


def test_the_kernel_reports_a_repeated_sample():
    shuffle = np.array([3, 1, 0, 2, 1], dtype=np.int64)
    samples = np.array([1, 2], dtype=np.int64)
    table, mask = lookup_filter(samples, 4)
    out = np.full(2, -1, np.int64)
    assert positions_of_samples(shuffle[:3], 0, table, mask, samples, out) == -1
    assert positions_of_samples(shuffle[3:], 3, table, mask, samples, out) == 4
    np.testing.assert_array_equal(out, [1, 3])


def test_fractional_training_positions_are_refused_not_truncated(maps):
    # before: [0.5, 1.7] gave the spans of positions 0 and 1
    with pytest.raises(ParameterError, match="Training positions must be integers"):
        sequence_spans(maps, SIZES, [0.5, 1.7])
    whole = sequence_spans(maps, SIZES, [0.0, 1.0])
    pd.testing.assert_frame_equal(whole, sequence_spans(maps, SIZES, [0, 1]))
    with pytest.raises(ParameterError, match=f"0 .. {len(maps) - 1}; got 18446744073709551615"):
        sequence_spans(maps, SIZES, np.array([2**64 - 1], dtype=np.uint64))


@pytest.mark.parametrize("position, message", [
    ([-3, 1], "0 or more; entry 0 is -3"),
    ([0.5, 2], "whole numbers; entry 0 is 0.5"),
    ([np.nan], "whole numbers"),
    (np.array([2**64 - 1], dtype=np.uint64), "beyond any data order"),
])
def test_exposure_steps_refuse_what_has_no_step(position, message):
    # before: a negative position came back as step -9223372036854775808
    with pytest.raises(ParameterError, match=message):
        exposure_steps(position, batch_size=2)
    with pytest.raises(ParameterError, match=message):
        exposure_frame(np.arange(np.size(position)), position, batch_size=2)


def test_exposure_steps_of_whole_floats_equal_those_of_integers():
    np.testing.assert_array_equal(exposure_steps([0.0, 3.0, 4.0], 2), exposure_steps([0, 3, 4], 2))


def test_a_step_that_is_not_a_number_is_refused_not_read_as_never_trained():
    # before: unit 2's '12x' became NaN, and unit 2 a validation instance
    table = pd.DataFrame({"unit": [1, 2, 3], "step": [5, "12x", 30]})
    with pytest.raises(ParameterError, match="'12x' for unit 2 \\(row 1\\)"):
        exposure_cohorts(table, [1, 2, 3], [10, 20, 30])


def test_empty_steps_still_mark_instances_never_trained():
    table = pd.DataFrame({"unit": [1, 2, 3], "step": ["5", None, ""]})
    out = exposure_cohorts(table, [1, 2, 3, 4], [10, 20, 30])
    np.testing.assert_array_equal(out["cohort"].to_numpy(), [10.0, np.nan, np.nan, np.nan])
    np.testing.assert_array_equal(out["exposures"].to_numpy(), [1, 0, 0, 0])


@pytest.mark.parametrize("window", [0, -1, True, 2.5])
def test_window_hashes_refuse_a_window_that_is_not_a_count(window):
    # before: 0 and -1 returned hashes read past the tokens, 2.5 a numba TypeError
    from didmem.orders import window_hashes

    with pytest.raises(ParameterError, match="window must be a positive integer"):
        window_hashes(np.arange(5), window)


def test_token_ids_that_are_not_integers_are_refused_not_truncated():
    from didmem.orders import window_hashes

    with pytest.raises(ParameterError, match="integer token ids"):
        window_hashes([1.5, 2.7, 3.0], 2)
    np.testing.assert_array_equal(window_hashes(np.array([5, 6, 7], np.uint16), 2),
                                  window_hashes([5, 6, 7], 2))


def test_find_windows_refuses_float_token_ids(tmp_path):
    from didmem.orders import find_windows, write_indexed_dataset

    dataset = write_indexed_dataset(tmp_path / "d", [[1, 2, 3, 4], [5, 6, 7, 8]])
    with pytest.raises(ParameterError, match="token ids of instance 0 must be"):
        find_windows(dataset, [0], [[1.0, 2.5, 3.0]], batch_size=1, window=2)
    found = find_windows(dataset, [0], [[1, 2, 3]], batch_size=1, window=2)
    assert found["position"].tolist() == [0] and found["tokens"].tolist() == [3]
