"""The `core` toolset: small, dependable tools every profile can have."""

from __future__ import annotations

import ast
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


def _evaluate(node: ast.AST) -> float | int:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > 1000:
            raise ValueError("exponent too large")
        return _OPS[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_evaluate(node.operand))
    raise ValueError("only numbers and + - * / // % ** are allowed")


@tool(toolset="core")
def calculate(expression: str) -> str:
    """Evaluate arithmetic exactly (models are bad at it).

    Args:
        expression: e.g. (17.5 * 3) / 4
    """
    if len(expression) > 500:
        return "Error: expression too long."
    try:
        return str(_evaluate(ast.parse(expression, mode="eval")))
    except (SyntaxError, ValueError, ZeroDivisionError, OverflowError) as exc:
        return f"Error: {exc}"


CORE_TOOLS = [current_time, calculate]
