"""Where a new Discord session reads back from: the inbox's last message per conversation, as channels."""

from __future__ import annotations

from datetime import UTC, datetime

from adapters.discord.catch_up import reading_plan
from hermes_engine.ports.inbound import LastInbound

AT = datetime(2025, 1, 1, tzinfo=UTC)


def test_a_thread_is_read_after_its_last_message_and_its_parent_channel_after_its_newest_thread():
    marks = [LastInbound("10", "20", "25", AT), LastInbound("10", None, "15", AT), LastInbound("10", "30", "30", AT)]
    assert reading_plan(marks) == {20: 25, 10: 30, 30: 30}


def test_ids_that_are_not_discords_are_passed_over():
    assert reading_plan([LastInbound("10", None, "goal-1-2", AT), LastInbound("dm", None, "5", AT),
                         LastInbound("10", "t", "7", AT)]) == {}
