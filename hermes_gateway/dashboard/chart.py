"""A line chart's geometry for an SVG drawn on the server: no script, no style attribute (the page's CSP
allows neither); the template draws it with SVG presentation attributes only, and a table beside it says
the same in text."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date

WIDTH, HEIGHT = 640, 240
LEFT, RIGHT, TOP, BOTTOM = 56, 16, 16, 40
TICKS = 4


@dataclass(frozen=True)
class Tick:
    at: float  # the SVG coordinate along its axis
    label: str


@dataclass(frozen=True)
class Chart:
    title: str
    width: int
    height: int
    points: str  # the polyline's "x,y x,y …", empty without data
    dots: tuple[tuple[float, float], ...]
    y_ticks: tuple[Tick, ...]
    x_ticks: tuple[Tick, ...]
    baseline_y: float | None  # the dashed line's height, when there is a baseline
    left: int = LEFT
    right: int = WIDTH - RIGHT
    top: int = TOP
    bottom: int = HEIGHT - BOTTOM

    @property
    def empty(self) -> bool:
        return not self.dots


def nice_top(value: float) -> float:
    """The smallest 1, 2, 2.5 or 5 times a power of ten at or above `value` (an axis's round top)."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    return next(step * power for step in (1, 2, 2.5, 5, 10) if step * power >= value)


def _label(value: float) -> str:
    return f"{value:,.0f}" if value >= 10 or value == int(value) else f"{value:.1f}"


def _offsets(days: Sequence[str]) -> list[int]:
    try:
        dates = [date.fromisoformat(day) for day in days]
    except ValueError:  # not days: evenly spaced
        return list(range(len(days)))
    return [(d - dates[0]).days for d in dates]


def line_chart(series: Sequence[tuple[str, float | None]], *, baseline: float | None = None,
               title: str = "") -> Chart:
    """`series`: (day "YYYY-MM-DD", value) oldest first; a day without a value is left out of the line."""
    offsets = _offsets([day for day, _ in series])  # days since the first: a quiet week leaves a gap
    known = [(offsets[i], v) for i, (_, v) in enumerate(series) if v is not None]
    top = nice_top(max([v for _, v in known] + ([baseline] if baseline is not None else []) + [0.0]) * 1.05)
    inner_w, inner_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    span = max(offsets[-1] if offsets else 0, 1)

    def x(offset: int) -> float:
        return round(LEFT + (inner_w * offset / span if offsets and offsets[-1] else inner_w / 2), 1)

    def y(v: float) -> float:
        return round(TOP + inner_h * (1 - v / top), 1)

    dots = tuple((x(i), y(v)) for i, v in known)
    y_ticks = tuple(Tick(y(top * k / TICKS), _label(top * k / TICKS)) for k in range(TICKS + 1))
    picks = sorted({0, len(series) // 2, len(series) - 1}) if series else []
    x_ticks = tuple(Tick(x(offsets[i]), series[i][0][5:]) for i in picks)  # "MM-DD"
    return Chart(title, WIDTH, HEIGHT, " ".join(f"{a},{b}" for a, b in dots), dots, y_ticks, x_ticks,
                 None if baseline is None else y(baseline))


__all__ = ["Chart", "Tick", "line_chart", "nice_top"]
