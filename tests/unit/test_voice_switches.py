"""Each conversation's voice switch in the store's documents: the profile's default until set, the same on
every replica (two stores on one database), and a document that cannot be read falls back to the default."""

from __future__ import annotations

import pytest
from postgres import BACKENDS, replica_stores

from hermes_engine.voice.state import AREA, VoiceState, VoiceSwitches


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_a_switch_set_on_one_replica_is_read_on_another(backend: str, tmp_path) -> None:
    async with replica_stores(backend, tmp_path) as (one, two):
        first, second = VoiceSwitches(one, default_on=False), VoiceSwitches(two, default_on=False)
        assert await second.get("telegram:dm:42") == VoiceState(on=False)
        assert await first.put("telegram:dm:42", VoiceState(on=True))
        assert await second.get("telegram:dm:42") == VoiceState(on=True)
        assert await second.put("telegram:dm:42", VoiceState(on=True, failure_told=True))
        assert await first.get("telegram:dm:42") == VoiceState(on=True, failure_told=True)
        assert await first.get("telegram:dm:7") == VoiceState(on=False)  # another conversation


async def test_the_profile_default_holds_until_set_and_an_unreadable_document_falls_back_to_it(tmp_path) -> None:
    async with replica_stores("sqlite", tmp_path, count=1) as (store,):
        switches = VoiceSwitches(store, default_on=True)
        assert (await switches.get("slack:C1:1.2")).on is True
        await store.put_document(AREA, "slack:C1:1.2", "not json", expected_version=0)
        assert (await switches.get("slack:C1:1.2")).on is True
        assert await switches.put("slack:C1:1.2", VoiceState(on=False))
        assert (await switches.get("slack:C1:1.2")).on is False
