"""How an answer cut at the output limit is asked to go on, and read back whole."""

from __future__ import annotations

from hermes_engine.agent.long_answers import answer_text
from hermes_engine.ports.conversation import Message
from hermes_engine.providers.continuation import CONTINUE, CUT, with_continuations

ASK = Message(role="user", content="tell me everything")
FIRST = Message(role="assistant", content="the first part, cut in the mid", meta={CUT: True})
SECOND = Message(role="assistant", content="dle of a word, then finished.")


def test_a_cut_answer_ending_the_history_is_followed_by_the_request_to_go_on() -> None:
    wire = with_continuations((ASK, FIRST))
    assert [(m.role, m.content) for m in wire] == [("user", ASK.content), ("assistant", FIRST.content),
                                                   ("user", CONTINUE)]


def test_the_request_to_go_on_stays_between_the_parts_of_an_answer_in_later_turns() -> None:
    later = Message(role="user", content="thanks")
    wire = with_continuations((ASK, FIRST, SECOND, later))
    assert [m.content for m in wire] == [ASK.content, FIRST.content, CONTINUE, SECOND.content, later.content]


def test_a_person_who_spoke_after_a_cut_answer_is_not_told_to_go_on() -> None:
    stopped_here = Message(role="user", content="stop, something else")
    assert with_continuations((ASK, FIRST, stopped_here)) == (ASK, FIRST, stopped_here)


def test_a_history_without_cut_answers_is_sent_as_it_is() -> None:
    history = (ASK, SECOND)
    assert with_continuations(history) is history


def test_the_answer_is_its_parts_joined_and_an_earlier_answer_is_not_part_of_it() -> None:
    earlier = Message(role="assistant", content="An earlier answer.")
    assert answer_text([earlier, ASK, FIRST, SECOND]) == FIRST.content + SECOND.content
    assert answer_text([ASK, earlier]) == "An earlier answer."
