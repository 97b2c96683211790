"""The slower loops around the core turn: background review (nudges), goals."""
