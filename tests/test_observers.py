"""Observer layers: hooks before and after a call, run by the stack in one step for a
run of adjacent observers, exactly as if each wrapped the next."""

from __future__ import annotations

import pytest
import trio

from manor import Done, MockProvider, ProviderError, Request, Stack
from manor.errors import BudgetExceeded
from manor.layers.stack import Inner, Layer, Listener, Observer
from manor.worlds.manor import CallerKind


def _backend(fail: bool = False) -> MockProvider:
    """Answers "ok" at its first checkpoint, or fails with ``ProviderError``."""

    async def handler(request: Request) -> str:
        await trio.lowlevel.checkpoint()
        if fail:
            raise ProviderError("down")
        return "ok"

    return MockProvider(handler)


class Noting(Observer):
    """Notes its hooks in a shared trace; ``refuse`` makes ``before`` raise."""

    def __init__(self, name: str, priority: int, trace: list[str], refuse: bool = False) -> None:
        self.name, self.priority, self.trace, self.refuse = name, priority, trace, refuse  # type: ignore[misc]

    def before(self, request: Request) -> object:
        self.trace.append(f"{self.name} before")
        if self.refuse:
            raise BudgetExceeded(f"{self.name} refuses")
        return f"{self.name} state"

    def after(self, request: Request, state: object, done: Done | None, error: BaseException | None) -> None:
        ended = "ok" if done is not None else type(error).__name__
        self.trace.append(f"{self.name} after {state} {ended}")


class Passing(Layer):
    """A wrapper that does nothing: between two observers, it stops them folding."""

    def __init__(self, priority: int) -> None:
        self.priority = priority  # type: ignore[misc]

    async def call(self, request: Request, listener: Listener, inner: Inner) -> Done:
        return await inner(request, listener)


class Overriding(Noting):
    """An observer that overrides ``call``: the stack must run its ``call``."""

    async def call(self, request: Request, listener: Listener, inner: Inner) -> Done:
        self.trace.append(f"{self.name} call")
        return await super().call(request, listener, inner)


async def _trace(fold: bool, refusing: str = "", fail: bool = False) -> list[str]:
    trace: list[str] = []
    observers = [Noting(name, 10 * (i + 1), trace, refuse=name == refusing) for i, name in enumerate("abc")]
    layers: list[Layer] = [*observers] if fold else [observers[0], Passing(15), observers[1], Passing(25), observers[2]]
    try:
        done = await Stack(_backend(fail), layers).call(Request(caller=CallerKind.CHARACTER, agent="x"))
        trace.append(f"answer {done.text}")
    except Exception as exc:
        trace.append(f"raised {type(exc).__name__}")
    return trace


@pytest.mark.trio
@pytest.mark.parametrize(("refusing", "fail"), [("", False), ("", True), ("a", False), ("b", False), ("c", False)])
async def test_adjacent_observers_run_in_one_step_exactly_as_if_nested(refusing: str, fail: bool) -> None:
    """Success, a backend failure, and a refusal by the outer, middle or inner observer."""
    folded = await _trace(True, refusing, fail)
    assert folded == await _trace(False, refusing, fail)
    if refusing == "b":
        assert folded == ["a before", "b before", "a after a state BudgetExceeded", "raised BudgetExceeded"]


@pytest.mark.trio
async def test_an_observer_that_overrides_call_is_run_as_a_wrapper() -> None:
    trace: list[str] = []
    layers = [Noting("a", 10, trace), Overriding("b", 20, trace)]
    await Stack(_backend(), layers).call(Request(caller=CallerKind.CHARACTER, agent="x"))
    assert trace == ["a before", "b call", "b before", "b after b state ok", "a after a state ok"]


@pytest.mark.trio
async def test_folded_observers_cost_no_coroutine_of_their_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stack calls their hooks; an observer's own ``call`` is for standing alone."""

    async def unused(self: Observer, request: Request, listener: Listener, inner: Inner) -> Done:
        raise AssertionError("the stack wrapped an observer in a coroutine of its own")

    monkeypatch.setattr(Observer, "call", unused)
    assert await _trace(True) == [
        "a before",
        "b before",
        "c before",
        "c after c state ok",
        "b after b state ok",
        "a after a state ok",
        "answer ok",
    ]
