"""A session's history has one owner: what it shows changes only through its own methods."""

from __future__ import annotations

from hermes_engine.ports.conversation import Message
from hermes_engine.ports.history import SessionHistory


def said(text: str) -> Message:
    return Message(role="user", content=text)


def test_a_new_view_replaces_the_shown_one_and_leaves_the_view_it_replaced_as_it_was():
    history = SessionHistory([said("one"), said("two")])
    old = history.view()
    history.replace_view([said("summary")])
    history.append(said("three"))
    assert [m.content for m in history] == ["summary", "three"]
    assert [m.content for m in old] == ["one", "two"]


def test_a_dropped_history_asks_for_a_load_and_keeps_its_messages_until_then():
    history = SessionHistory([said("one")])
    history.drop()
    assert not history.loaded and [m.content for m in history.view()] == ["one"]  # a turn it raced goes on
    history.load([said("stored")])
    assert history.loaded and [m.content for m in history] == ["stored"]


def test_a_history_made_on_a_list_extends_that_list():
    messages = [said("one")]
    SessionHistory(messages).append(said("two"))
    assert [m.content for m in messages] == ["one", "two"]
    assert not SessionHistory().loaded


def test_a_swap_puts_the_new_message_where_the_old_one_is_now():
    note, kept = said("with a private note"), said("as stored")
    history = SessionHistory([said("one"), note])
    history.replace_view([said("summary"), note, said("answer")])
    history.swap(note, kept)
    assert [m.content for m in history] == ["summary", "as stored", "answer"]
