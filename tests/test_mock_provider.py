"""MockProvider: a plain function is a backend (httpx's MockTransport)."""

from __future__ import annotations

import pytest
import trio
import trio.testing

import manor
from manor import Done, MockProvider, ProviderError, Request, Stack, TimeoutLayer, Usage
from manor.calls import Started
from manor.errors import CallTimeout
from manor.providers import collect


def _request(agent: str = "hobbes") -> Request:
    return Request(caller="character", agent=agent)


class TestMockProvider:
    @pytest.mark.trio
    async def test_a_returned_text_is_the_answer_after_a_started(self) -> None:
        """A string answers; the stream is Started, then its Done."""
        events: list[object] = []
        done = await collect(MockProvider(lambda request: f"{request.agent} bows."), _request(), events.append)
        assert done == Done(text="hobbes bows.")
        assert events == [Started(), done]

    @pytest.mark.trio
    async def test_a_returned_done_is_kept_whole(self) -> None:
        """A Done answers as it is, its usage too."""
        answer = Done(text="Quite.", usage=Usage(input_tokens=3, output_tokens=1))
        assert await collect(MockProvider(lambda request: answer), _request()) is answer

    @pytest.mark.trio
    async def test_an_async_handler_waits_its_latency(self, autojump_clock: trio.testing.MockClock) -> None:
        """An async handler's waits are the call's latency, exact under the virtual clock."""

        async def handler(request: Request) -> str:
            await trio.sleep(1.5)
            return "late"

        start = trio.current_time()
        assert (await collect(MockProvider(handler), _request())).text == "late"
        assert trio.current_time() - start == 1.5

    @pytest.mark.trio
    async def test_what_the_handler_raises_is_the_call_s_error(self) -> None:
        """A CallError from the handler fails the call, as a real backend's would."""

        def handler(request: Request) -> str:
            raise ProviderError(f"{request.agent} is out")

        with pytest.raises(ProviderError, match="hobbes is out"):
            await collect(MockProvider(handler), _request())

    @pytest.mark.trio
    async def test_it_is_cold_and_layers_wrap_it(self, autojump_clock: trio.testing.MockClock) -> None:
        """Nothing runs until the stream is iterated; a timeout layer bounds it."""
        asked: list[str] = []

        async def handler(request: Request) -> str:
            asked.append(request.agent)
            await trio.sleep(10)
            return "never"

        backend = MockProvider(handler)
        stream = backend.invoke(_request())
        assert asked == []
        await stream.aclose()
        with pytest.raises(CallTimeout):
            await Stack(backend, [TimeoutLayer(2.0)]).call(_request())
        assert asked == ["hobbes"] and trio.current_time() == 2.0

    def test_it_is_exported_from_manor(self) -> None:
        assert manor.MockProvider is MockProvider and "MockProvider" in manor.__all__
