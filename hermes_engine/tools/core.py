"""The `core` toolset: small, dependable tools every profile can have."""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from hermes_engine.tools.registry import tool


@tool(toolset="core")
def current_time(timezone: str = "UTC") -> str:
    """Current date and time. The system prompt has no clock, so ask this tool.

    Args:
        timezone: IANA name, e.g. Europe/Berlin
    """
    try:
        zone = ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        return f"Error: unknown timezone {timezone!r}; use an IANA name such as Europe/Berlin."
    return datetime.now(zone).strftime("%Y-%m-%d %H:%M:%S %Z (%A)")


_OPS: dict[type[ast.AST], Callable[..., float | int]] = {
        ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
        ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
        ast.USub: operator.neg, ast.UAdd: operator.pos}
MAX_DIGITS = 4000
MAX_BITS = int(MAX_DIGITS * math.log2(10))  # every number calculate makes or reads stays under this
TOO_LARGE = f"the numbers get too large: calculate handles up to about {MAX_DIGITS:,} digits"


class TooLarge(ValueError):
    """A number beyond `MAX_BITS`: refused before it is computed, so no expression can run for seconds
    or fill memory (big-integer arithmetic holds the GIL: even in its own thread it would stall every chat)."""

    def __init__(self) -> None:
        super().__init__(TOO_LARGE)


def _bits(value: float | int) -> float:
    """Size of an integer in bits; floats are fixed-size (they overflow to an error or inf instead)."""
    return abs(value).bit_length() if isinstance(value, int) else 0


def _check_sizes(op: ast.AST, left: float | int, right: float | int) -> None:
    """Refuse an operation whose integer result would exceed `MAX_BITS`, before computing it."""
    if isinstance(op, ast.Pow) and isinstance(left, int) and isinstance(right, int) and right > 0:
        if abs(left) > 1 and (right > MAX_BITS or right * math.log2(abs(left)) > MAX_BITS):
            raise TooLarge()
    elif isinstance(op, ast.Mult) and _bits(left) + _bits(right) > MAX_BITS + 1:
        raise TooLarge()


def _evaluate(node: ast.AST) -> float | int:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        left, right = _evaluate(node.left), _evaluate(node.right)
        _check_sizes(node.op, left, right)
        result = _OPS[type(node.op)](left, right)
    elif isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
        result = _OPS[type(node.op)](_evaluate(node.operand))
    else:
        raise ValueError("only numbers and + - * / // % ** are allowed")
    if _bits(result) > MAX_BITS:
        raise TooLarge()
    return result


@tool(toolset="core", time_limit=5.0)
def calculate(expression: str) -> str:
    """Evaluate arithmetic exactly (models are bad at it).

    Args:
        expression: e.g. (17.5 * 3) / 4
    """
    if len(expression) > 500:
        return "Error: expression too long."
    try:
        return str(_evaluate(ast.parse(expression, mode="eval")))
    except OverflowError:
        return "Error: the result is too large for a floating-point number."
    except (SyntaxError, ValueError, ZeroDivisionError) as exc:
        return f"Error: {exc}"


CORE_TOOLS = [current_time, calculate]
