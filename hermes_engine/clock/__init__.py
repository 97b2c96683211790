"""The clock: reminders and scheduled tasks that arrive once, on time, in the chat they were made in
(`ClockFeature`)."""

from hermes_engine.clock.feature import ClockFeature

__all__ = ["ClockFeature"]
