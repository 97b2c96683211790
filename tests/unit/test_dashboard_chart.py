"""The Learning page's chart geometry: days placed by date, the axis's round top, a baseline drawn where
its value is."""

from __future__ import annotations

from hermes_gateway.dashboard.chart import HEIGHT, LEFT, RIGHT, WIDTH, line_chart, nice_top


def test_days_are_placed_by_their_date_so_a_quiet_week_leaves_a_gap() -> None:
    chart = line_chart([("2026-11-01", 10.0), ("2026-11-02", 8.0), ("2026-11-11", 4.0)])
    xs = [x for x, _ in chart.dots]
    assert xs[0] == LEFT and xs[-1] == WIDTH - RIGHT
    assert round((xs[1] - xs[0]) * 10) == round(xs[2] - xs[0])  # one day of ten


def test_fewer_calls_are_drawn_lower_and_the_baseline_above_them() -> None:
    chart = line_chart([("2026-11-01", 9.0), ("2026-11-02", 3.0)], baseline=12.0)
    (_, first), (_, second) = chart.dots
    assert first < second < HEIGHT  # SVG's y grows downwards
    assert chart.baseline_y is not None and chart.baseline_y < first
    assert [t.label for t in chart.y_ticks] == ["0", "5", "10", "15", "20"]


def test_a_day_without_a_figure_is_left_out_of_the_line() -> None:
    chart = line_chart([("2026-11-01", None), ("2026-11-02", 2.0)])
    assert len(chart.dots) == 1 and chart.points.count(",") == 1
    assert line_chart([]).empty


def test_the_axis_ends_on_a_round_number() -> None:
    assert [nice_top(v) for v in (0, 0.7, 3, 13, 2100, 7600)] == [1.0, 1.0, 5, 20, 2500, 10000]
