"""A step's journaled model (`Timed[result]`) is made once per result type, not at every step:
pydantic keeps the generic models it makes only weakly, so each garbage collection threw it away
and the next step (or replay) built its schema and validator again."""

from __future__ import annotations

import gc

import pytest
from pydantic import BaseModel
from pydantic._internal import _generics

from replenisher.durable.clock import Timed
from replenisher.durable.steps import timed_model


class Answer(BaseModel):
    value: int = 1


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    made: list[str] = []
    real = _generics.create_generic_submodel

    def counted(name: str, *args: object, **kwargs: object) -> object:
        made.append(name)
        return real(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(_generics, "create_generic_submodel", counted)
    return made


def test_the_model_is_made_once_whatever_the_collector_does(builds: list[str]) -> None:
    first = timed_model(Answer)
    for _ in range(5):
        gc.collect()
        assert timed_model(Answer) is first
    assert len(builds) <= 1
    assert first.model_validate({"value": {"value": 3}, "at": 1.5}).value.value == 3


def test_the_control_pydantic_alone_builds_it_again_after_a_collection(builds: list[str]) -> None:
    class Other(BaseModel):
        value: int = 2

    for _ in range(3):
        Timed[Other]
        gc.collect()
    assert len(builds) == 3
