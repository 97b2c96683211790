"""A home that cannot hold the gateway's data is one sentence naming HERMES_HOME and what to do, and trying
it leaves nothing behind, whether the home exists yet or not."""

from __future__ import annotations

import os

import pytest

from hermes_gateway.home_check import ServiceUser, home_problem


def test_a_home_still_to_be_made_is_usable_and_is_not_made(tmp_path):
    home = tmp_path / "a" / "home"
    assert home_problem(home) is None
    assert list(tmp_path.iterdir()) == []


def test_an_existing_home_is_usable_and_stays_empty(tmp_path):
    assert home_problem(tmp_path) is None
    assert list(tmp_path.iterdir()) == []


def test_a_home_that_is_a_file_says_so(tmp_path):
    home = tmp_path / "home"
    home.write_text("x")
    assert home_problem(home) == (f"HERMES_HOME={home} is a file, not a folder: point HERMES_HOME at a folder (it "
                                  f"is created when missing).")


def test_a_home_under_a_file_names_the_file(tmp_path):
    (tmp_path / "file").write_text("x")
    home = tmp_path / "file" / "home"
    problem = home_problem(home)
    assert problem is not None and problem.startswith(f"HERMES_HOME={home} cannot be created: {tmp_path / 'file'} "
                                                      f"is a file, not a folder")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_a_home_this_user_cannot_write_names_the_user_and_the_folder(tmp_path):
    home = tmp_path / "home"
    home.mkdir(mode=0o500)
    problem = home_problem(home)
    assert problem is not None and "cannot create files in" in problem and "Permission denied" in problem


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can try as another user")
def test_as_root_the_home_is_tried_as_the_service_user_not_as_root(tmp_path):
    nobody = ServiceUser.named("nobody")
    home = tmp_path / "home"
    home.mkdir(mode=0o700)  # root's alone
    assert home_problem(home) is None
    problem = home_problem(home, nobody)
    assert problem is not None and "the user nobody cannot create files in" in problem
    assert list(home.iterdir()) == []


def test_an_unknown_service_user_is_one_sentence():
    with pytest.raises(ValueError, match="^--service-user no-such-user-here: there is no user of that name"):
        ServiceUser.named("no-such-user-here")
