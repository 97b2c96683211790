"""Agent tools: typed Python functions whose JSON schemas are derived from their signatures."""

from hermes_engine.tools.registry import Tool, ToolContext, ToolRegistry, ToolResult, tool

__all__ = ["Tool", "ToolContext", "ToolRegistry", "ToolResult", "tool"]
