"""The charts' axis code (accel_sim/report/svg.py): round ticks that bound the data, labels that are
plain numbers in one style (no milli prefix on a count), whole-number ticks for counts, log axes
with labels across less than a decade, and a timeline's time axis."""

from __future__ import annotations

import pytest

from accel_sim.report.svg import Scale, fmt_number, linear_tick_labels, log_tick_label, time_ticks


def test_a_count_axis_has_whole_ticks_and_no_milli_prefix():
    # A queue of at most 1.5 requests on average per bin, or 5 at most: ticks 0, 1, 2 and 0..5.
    small = Scale(0.0, 1.5, 300.0, 30.0, integer=True).nice()
    assert (small.lo, small.hi) == (0, 2) and small.ticks() == [0, 1, 2]
    assert small.tick_labels(small.ticks()) == ["0", "1", "2"]
    assert Scale(0.0, 5.0, 300.0, 30.0, integer=True).nice().ticks() == [0, 1, 2, 3, 4, 5]
    assert Scale(0.0, 23.0, 300.0, 30.0, integer=True).nice().ticks() == [0, 5, 10, 15, 20, 25]
    # A plain axis of the same range steps by halves, written as decimals.
    halves = Scale(0.0, 1.5, 300.0, 30.0).nice()
    assert halves.tick_labels(halves.ticks()) == ["0.0", "0.5", "1.0", "1.5"]
    assert fmt_number(0.5) == "0.5" and fmt_number(0.25, "B") == "0.25 B" and fmt_number(2.5e12, "FLOP/s") == "2.5 TFLOP/s"


def test_nice_range_bounds_the_data_with_round_ticks():
    s = Scale(0.0, 23.19, 0.0, 1.0).nice()  # sweep latencies up to 23.19 ms: 0..25 by 5
    assert (s.lo, s.hi) == (0, 25) and s.ticks() == [0, 5, 10, 15, 20, 25]
    s = Scale(0.08, 165.6, 0.0, 1.0).nice()  # a serving run's 165.6 s from its first arrival: 0..200 by 50
    assert (s.lo, s.hi) == (0, 200) and s.ticks() == [0, 50, 100, 150, 200]
    s = Scale(0.0, 1.0, 0.0, 1.0)  # a CDF's fractions: 0.2 steps with one decimal
    assert s.tick_labels(s.ticks()) == ["0.0", "0.2", "0.4", "0.6", "0.8", "1.0"]


def test_linear_labels_share_one_style():
    assert linear_tick_labels([0, 0.25, 0.5, 0.75]) == ["0.00", "0.25", "0.50", "0.75"]
    assert linear_tick_labels([0, 2500, 5000, 7500]) == ["0", "2,500", "5,000", "7,500"]
    assert linear_tick_labels([0, 20000, 40000]) == ["0", "20 k", "40 k"]
    assert linear_tick_labels([0, 2.5e6, 5e6]) == ["0", "2.5 M", "5.0 M"]
    assert linear_tick_labels([-1, 0, 1]) == ["-1", "0", "1"]


def test_log_axis_has_labels_across_less_than_a_decade():
    # TTFTs from 20 to 155 ms: a power of ten alone labels one tick (100); 1-2-5 steps label four.
    s = Scale(20.0, 155.0, 0.0, 1.0, log=True).nice()
    assert (s.lo, s.hi) == (20, 200) and s.ticks() == [20, 50, 100, 200]
    assert s.tick_labels(s.ticks()) == ["20", "50", "100", "200"]
    # 1.5 to 3.5 s: less than half a decade, round linear steps on the log axis.
    s = Scale(1.5, 3.5, 0.0, 1.0, log=True).nice()
    assert s.ticks() == [1.5, 2.0, 2.5, 3.0, 3.5]
    # Many decades: powers of ten, every one while there are at most eight.
    s = Scale(0.05, 3000.0, 0.0, 1.0, log=True).nice()
    assert (s.lo, s.hi) == (0.01, 10000) and s.ticks() == [0.01, 0.1, 1, 10, 100, 1000, 10000]
    assert s.tick_labels(s.ticks()) == ["0.01", "0.1", "1", "10", "100", "1 k", "10 k"]
    assert [log_tick_label(v) for v in (2e-5, 0.005, 1e15, 2e12)] == ["2e-05", "0.005", "1 P", "2 T"]


def test_time_axis_of_a_timeline():
    unit, ticks = time_ticks(0.0, 0.0256)  # a 25.6 ms step: 0..25 ms by 5
    assert unit == "ms"
    assert [text for _, text in ticks] == ["0", "5", "10", "15", "20", "25"]
    assert [t for t, _ in ticks] == pytest.approx([0, 0.005, 0.010, 0.015, 0.020, 0.025], abs=1e-15)
    unit, ticks = time_ticks(0.0, 0.633)  # a 633 ms pipeline step: 633 / 6 = 105.5 ms a tick at least, so 200
    assert unit == "ms" and [text for _, text in ticks] == ["0", "200", "400", "600"]
    unit, ticks = time_ticks(0.0102, 0.0104)  # zoomed into 200 us: 33.3 us a tick at least, so 50, in ms
    assert unit == "ms" and [text for _, text in ticks] == ["10.20", "10.25", "10.30", "10.35", "10.40"]
    unit, ticks = time_ticks(0.0, 0.0002)  # the first 200 us
    assert unit == "µs" and [text for _, text in ticks] == ["0", "50", "100", "150", "200"]
