"""A profile's `clock:` settings: how many jobs a person keeps, how often one may fire, and what a scheduled
task may do when it runs with nobody at the keyboard."""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel, ConfigDict, Field, field_validator


class ClockSettings(BaseModel):
    """Bounds on reminders and scheduled tasks (hermes_engine/clock/)."""

    model_config = ConfigDict(extra="forbid")

    # active or paused jobs per person: nobody fills the clock (or a chat) with jobs
    max_jobs_per_person: int = Field(25, ge=1)
    # a recurring schedule firing more often than this is refused; seconds, or ISO 8601 such as PT5M
    min_interval: timedelta = timedelta(minutes=5)
    # a task run may make, change or remove jobs itself (a job that makes jobs can multiply unseen)
    allow_jobs_from_tasks: bool = False
    # what a task may use when its job names no toolsets; a job names only toolsets the profile offers
    task_toolsets: list[str] = Field(default_factory=lambda: ["core", "web"])
    task_max_iterations: int = Field(20, ge=1)  # a task run's model calls

    @field_validator("min_interval")
    @classmethod
    def _at_least_a_minute(cls, value: timedelta) -> timedelta:
        if value < timedelta(minutes=1):
            raise ValueError("must be at least one minute")
        return value
