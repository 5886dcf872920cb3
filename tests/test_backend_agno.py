"""The agno remote-agent adapter: over HTTP against the loopback server, and in process
under the virtual clock (the same adapter code)."""

from __future__ import annotations

import httpx
import pytest
import trio
from agent_servers import serving, wait_for

from manor.calls import Done, Request, TextDelta, Usage
from manor.errors import CallTimeout, ProviderError, SessionLimitError
from manor.providers import collect
from manor.providers.agno import AgnoProvider, HttpAgentTransport
from manor.serve import AgentHost, LocalAgentTransport
from manor.worlds.manor import CallerKind


def _request(prompt: str, agent: str = "the countess") -> Request:
    return Request(caller=CallerKind.CHARACTER, agent=agent, prompt=prompt)


async def _events(provider, prompt: str) -> list:
    return [event async for event in provider.invoke(_request(prompt))]


def _adapter(url: str, **options) -> AgnoProvider:
    return AgnoProvider(HttpAgentTransport(url), "agent", **options)


class TestOverHttp:
    @pytest.mark.trio
    async def test_non_streaming_run_answers_with_usage(self) -> None:
        """The JSON run's content and metrics become Done's text and usage."""
        async with serving() as (url, _):
            events = await _events(_adapter(url), "where is the key")
        assert events[-1] == Done(text="agent heard: where is the key", usage=Usage(input_tokens=4, output_tokens=6))

    @pytest.mark.trio
    async def test_streaming_run_streams_content(self) -> None:
        async with serving() as (url, _):
            events = await _events(_adapter(url, stream=True), "where is the key @latency=0.2")
        deltas = [e.text for e in events if isinstance(e, TextDelta)]
        assert len(deltas) >= 2 and "".join(deltas) == "agent heard: where is the key"
        assert events[-1].usage == Usage(input_tokens=4, output_tokens=6)

    @pytest.mark.trio
    @pytest.mark.parametrize("stream", [False, True])
    async def test_model_error_in_a_200_is_a_provider_error(self, stream: bool) -> None:
        """AgentOS reports a model failure as status ERROR / RunError, not an HTTP error."""
        async with serving() as (url, _):
            with pytest.raises(ProviderError, match="the run failed: .*the model failed"):
                await _events(_adapter(url, stream=stream), "hi @model-error")

    @pytest.mark.trio
    async def test_429_is_flow_control(self) -> None:
        async with serving() as (url, _):
            with pytest.raises(SessionLimitError) as info:
                await _events(_adapter(url), "hi @status=429 @retry-after=3")
        assert info.value.retry_after == 3.0 and info.value.reason == "platform_rejected"

    @pytest.mark.trio
    async def test_5xx_and_unknown_agent_are_provider_errors(self) -> None:
        async with serving() as (url, _):
            with pytest.raises(ProviderError, match="HTTP 502"):
                await _events(_adapter(url), "hi @status=502")
            with pytest.raises(ProviderError, match="no such agent"):
                await _events(AgnoProvider(HttpAgentTransport(url), "nobody"), "hi")

    @pytest.mark.trio
    @pytest.mark.parametrize("stream", [False, True])
    async def test_garbage_is_a_clear_provider_error(self, stream: bool) -> None:
        async with serving() as (url, _):
            with pytest.raises(ProviderError, match="answered garbage"):
                await _events(_adapter(url, stream=stream), "hi @garbage")

    @pytest.mark.trio
    async def test_timeout_without_cancel_leaves_the_remote_run_running(self) -> None:
        """Timed out is not cancelled: the worker is free, the hung run goes on remotely."""
        async with serving() as (url, host):
            adapter = _adapter(url, workers=1, timeout=0.5)
            with pytest.raises(CallTimeout, match="within 0.5s$"):
                await _events(adapter, "@hang")
            await trio.sleep(0.3)
            assert host.statistics().running == 1 and host.statistics().cancelled == 0
            assert adapter.statistics().busy == 0 and adapter.statistics().timed_out == 1

    @pytest.mark.trio
    async def test_timeout_with_cancel_cancels_the_remote_run(self) -> None:
        async with serving() as (url, host):
            adapter = _adapter(url, timeout=0.5, cancel_remote=True)
            with pytest.raises(CallTimeout, match="remote run cancelled"):
                await _events(adapter, "@hang")
            await wait_for(lambda: host.statistics().cancelled == 1)
            assert host.statistics().running == 0 and adapter.statistics().cancels_sent == 1

    @pytest.mark.trio
    async def test_timed_out_while_queued_remotely_is_dropped(self) -> None:
        """A run still in the server's queue when its client hangs up is dropped."""
        async with serving(capacity=1) as (url, host):
            blocker = _adapter(url)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_events, blocker, "@hang")
                await wait_for(lambda: host.statistics().running == 1)
                with pytest.raises(CallTimeout):
                    await _events(_adapter(url, timeout=0.5), "waiting in line")
                await wait_for(lambda: host.statistics().dropped == 1)
                assert host.statistics().queued == 0
                nursery.cancel_scope.cancel()

    @pytest.mark.trio
    async def test_streaming_run_cancelled_remotely_is_an_error(self) -> None:
        async with serving() as (url, host):
            adapter = _adapter(url, stream=True)
            async with trio.open_nursery() as nursery:

                async def cancel_soon() -> None:
                    await wait_for(lambda: host.statistics().running == 1)
                    (record,) = host.records()
                    async with httpx.AsyncClient() as client:
                        response = await client.post(f"{url}/agents/agent/runs/{record.run_id}/cancel")
                    assert response.status_code == 200 and response.json() == {}

                nursery.start_soon(cancel_soon)
                with pytest.raises(ProviderError, match="cancelled remotely"):
                    await _events(adapter, "@hang")


class TestInProcess:
    """Exact times: the adapter over LocalAgentTransport under the virtual clock."""

    @staticmethod
    async def _run(adapter: AgnoProvider, arrivals: dict[str, float]) -> dict[str, tuple[float, str]]:
        start = trio.current_time()
        ended: dict[str, tuple[float, str]] = {}

        async def call(name: str, at: float) -> None:
            await trio.sleep_until(start + at)
            try:
                await _events(adapter, name)
                ended[name] = (trio.current_time() - start, "answered")
            except CallTimeout:
                ended[name] = (trio.current_time() - start, "timed_out")

        async with trio.open_nursery() as nursery:
            for name, at in arrivals.items():
                nursery.start_soon(call, name, at)
        return ended

    @pytest.mark.trio
    async def test_workers_are_served_fifo(self, autojump_clock: trio.testing.MockClock) -> None:
        """One worker, three calls of 1 s arriving 0.25 s apart: they end at 1, 2, 3."""
        host = AgentHost(agents=("agent",), latency=1.0)
        async with trio.open_nursery() as nursery:
            await nursery.start(host.serve)
            adapter = AgnoProvider(LocalAgentTransport(host), "agent", workers=1)
            ended = await self._run(adapter, {"a": 0.0, "b": 0.25, "c": 0.5})
            nursery.cancel_scope.cancel()
        assert ended == {"a": (1.0, "answered"), "b": (2.0, "answered"), "c": (3.0, "answered")}

    @pytest.mark.trio
    async def test_each_adapter_has_its_own_session_per_agent(self, autojump_clock: trio.testing.MockClock) -> None:
        """Built by hand, an adapter draws its own run id: sessions never leak between adapters."""
        host = AgentHost(agents=("agent",), latency=1.0)
        async with trio.open_nursery() as nursery:
            await nursery.start(host.serve)
            adapters = [AgnoProvider(LocalAgentTransport(host), "agent") for _ in range(2)]
            for adapter in adapters:
                for agent in ("the countess", "the butler", "the countess"):
                    await collect(adapter, _request("hi", agent=agent))
            nursery.cancel_scope.cancel()
        first, second = (adapter.run_id for adapter in adapters)
        assert first != second
        assert [record.session_id for record in host.records()] == [
            f"manor-{run}-{agent}" for run in (first, second) for agent in ("the countess", "the butler", "the countess")
        ]

    def test_an_unknown_session_placeholder_is_refused(self) -> None:
        with pytest.raises(ValueError, match=r"session_id: unknown placeholder \{user\}"):
            AgnoProvider(LocalAgentTransport(AgentHost()), "agent", session_id="{user}-{agent}")

    @pytest.mark.trio
    async def test_timeout_counts_from_getting_a_worker(self, autojump_clock: trio.testing.MockClock) -> None:
        """Timeout 1.5 s: b waits 1 s for the worker, then answers 1 s later (2 s in all)."""
        host = AgentHost(agents=("agent",), latency=1.0)
        async with trio.open_nursery() as nursery:
            await nursery.start(host.serve)
            adapter = AgnoProvider(LocalAgentTransport(host), "agent", workers=1, timeout=1.5)
            ended = await self._run(adapter, {"a": 0.0, "b": 0.25, "c @hang": 0.5})
            nursery.cancel_scope.cancel()
        assert ended == {"a": (1.0, "answered"), "b": (2.0, "answered"), "c @hang": (3.5, "timed_out")}


class TestCancelOnlyWhatWasAbandoned:
    """With ``cancel_remote``, a cancel goes out for a run the caller gave up on, never
    for one that answered: a caller that stops at the answer (``collect``, as the tick
    loop does) used to send a cancel after every answered run, holding its gate slot
    for that request, and AgentOS stored a cancellation intent for each."""

    @pytest.mark.trio
    @pytest.mark.parametrize("stream", [False, True])
    async def test_three_answered_runs_send_no_cancel(self, stream: bool) -> None:
        async with serving() as (url, host):
            adapter = _adapter(url, cancel_remote=True, stream=stream)
            for n in range(3):
                done = await collect(adapter, _request(f"question {n}"))
                assert done.text == f"agent heard: question {n}"
            assert adapter.statistics().cancels_sent == 0
            assert host.statistics().cancelled == 0

    @pytest.mark.trio
    async def test_a_run_abandoned_before_its_answer_is_cancelled(self) -> None:
        async with serving() as (url, host):
            adapter = _adapter(url, cancel_remote=True, stream=True)
            # Given up once the server runs it (not after a fixed 0.3 s, which a loaded
            # machine could spend before the run reached the server).
            async with trio.open_nursery() as nursery:
                nursery.start_soon(collect, adapter, _request("slow one @latency=30"))
                await wait_for(lambda: host.statistics().running == 1)
                nursery.cancel_scope.cancel()
            await wait_for(lambda: host.statistics().cancelled == 1)
            assert adapter.statistics().cancels_sent == 1


class TestRefusedUpstream:
    """A 429 behind AgentOS: Agno answers 200 with ``status: ERROR`` and the provider's
    message. That is the platform refusing — ``platform_rejected``, by the server, with
    its wait when the message says one — not ``provider_error``."""

    @pytest.mark.trio
    @pytest.mark.parametrize("stream", [False, True])
    async def test_a_rate_limit_passed_on_is_the_server_refusing(self, stream: bool) -> None:
        async with serving() as (url, _):
            with pytest.raises(SessionLimitError) as info:
                await _events(_adapter(url, stream=stream), "hi @model-error=429")
        refusal = info.value
        assert (refusal.reason, refusal.refused_by, refusal.retry_after) == ("platform_rejected", "server", 2.0)
        assert "refused upstream: Error code: 429 - Rate limit reached" in str(refusal)

    @pytest.mark.trio
    async def test_another_model_error_is_still_a_provider_error(self) -> None:
        async with serving() as (url, _):
            with pytest.raises(ProviderError, match="the run failed") as info:
                await _events(_adapter(url), "hi @model-error=500")
        assert not isinstance(info.value, SessionLimitError)
