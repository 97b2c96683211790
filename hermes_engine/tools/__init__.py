"""Agent tools: typed Python functions whose JSON schemas are derived from their signatures."""

from hermes_engine.ports.tools import Tool, ToolContext, ToolResult
from hermes_engine.tools.registry import ToolRegistry, tool

__all__ = ["Tool", "ToolContext", "ToolRegistry", "ToolResult", "tool"]
