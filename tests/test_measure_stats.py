"""Statistics of samples, checked against exact values and NumPy."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dlbench.measure.stats import LatencyStats, percentile, summarize, throughput
from dlbench.spec.record_dict import from_dict, to_dict


def test_summary_of_one_to_ten_milliseconds_is_exact():
    stats = summarize([i / 1000.0 for i in range(1, 11)])
    assert stats.n == 10
    assert stats.median == pytest.approx(5.5)
    assert stats.mean == pytest.approx(5.5)
    assert stats.p90 == pytest.approx(9.1)
    assert stats.p99 == pytest.approx(9.91)
    assert stats.iqr == pytest.approx(7.75 - 3.25)
    assert stats.std == pytest.approx(math.sqrt(55 / 6))
    assert (stats.min, stats.max) == (pytest.approx(1.0), pytest.approx(10.0))


@pytest.mark.parametrize("q", [0, 10, 25, 50, 75, 90, 99, 100])
def test_percentile_matches_numpy_linear(q):
    rng = np.random.default_rng(3)
    values = sorted(rng.random(37).tolist())
    assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)))


def test_single_sample_has_zero_spread():
    stats = summarize([0.002])
    assert (stats.median, stats.std, stats.iqr, stats.n) == (2.0, 0.0, 0.0, 1)


def test_noise_flag_follows_iqr_over_median():
    steady = summarize([0.010] * 20)
    assert not steady.noisy
    spread = summarize([0.005, 0.010, 0.015, 0.020] * 5)
    assert spread.noisy


def test_throughput_is_batch_over_mean_step_time():
    stats = summarize([0.001, 0.003])  # mean 2 ms
    assert throughput(64, stats) == pytest.approx(32_000.0)


def test_no_samples_is_an_error():
    with pytest.raises(ValueError):
        summarize([])


def test_stats_round_trip_through_the_records_json():
    stats = summarize([0.001, 0.002, 0.004])
    assert from_dict(LatencyStats, to_dict(stats)) == stats


def test_a_list_of_numbers_is_read_at_once_and_a_wrong_one_named_by_its_index():
    """A record built in a process holds NumPy's floats (a float's subclass), which JSON
    never gives: they are numbers all the same; a string among numbers is named."""
    from dlbench.results.details import Details

    numpy_floats = {"measured_wall": [np.float64(1.0), np.float64(2.5)]}
    assert from_dict(Details, numpy_floats).measured_wall == (1.0, 2.5)
    with pytest.raises(ValueError, match=r"measured_wall\[1\]: expected float, not str"):
        from_dict(Details, {"measured_wall": [1.0, "2.5"]})
    with pytest.raises(ValueError, match=r"measured_wall\[0\]: expected float, not bool"):
        from_dict(Details, {"measured_wall": [True, 2.5]})
