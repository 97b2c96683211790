"""Hermes Gateway engine: everything platform-agnostic.

Nothing under this package imports a platform SDK; adapters translate, the engine decides.
"""

__version__ = "0.1.0"
