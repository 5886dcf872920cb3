"""The replay backend: answers each call with the response recorded for it, after the
time the recorded backend took."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Iterable
from contextlib import aclosing
from typing import Literal, final

import attrs
import trio

from ..calls import Done, Event, Request, Started, TextDelta, Usage
from ..errors import ProviderError, SessionLimitError
from ..providers.provider import Provider
from ..records import CallRecord
from ..saves.format import TickFrame

__all__ = ["RecordedResponse", "ReplayBackend", "reached_backend", "recorded_responses"]

#: The key a recorded response is found by, less the attempt: (tick, caller kind, agent).
Key = tuple[int, str, str]


@attrs.frozen
class RecordedResponse:
    """What the backend did with one call in the recording.

    Attributes:
        kind: ``answer`` (text and tokens), ``error`` (the backend failed), ``refused``
            (the server refused it: a 429), or ``unanswered`` (the call was cut off —
            timed out or cancelled — before the backend answered; what it would have
            said is unknown).
        attempt: which try of the call it was (0 = the first).
        opened_at: when the backend got the call (its platform session opened).
        finished_at: when the call ended.
        error: what the backend said, for ``error`` and ``refused``.
    """

    kind: Literal["answer", "error", "refused", "unanswered"]
    attempt: int
    opened_at: float
    finished_at: float
    text: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    error: str = ""

    @property
    def latency(self) -> float:
        """What the backend took."""
        return max(0.0, self.finished_at - self.opened_at)


def reached_backend(call: CallRecord) -> bool:
    """Whether a recorded call got as far as the backend.

    ``admitted_at`` is when the gate let it through — and the platform session opens at
    that same instant, unless Manor's platform limiter refuses it — or, without a gate
    (legacy), when the session opened. A call never admitted was stopped before: at the
    gate, by the breaker, by the cost budget. A call the *server* refused (a 429) did
    reach the backend: the refusal is its answer.
    """
    return call.admitted_at is not None and call.refused_by != "limiter"


def recorded_responses(ticks: Iterable[TickFrame]) -> dict[Key, list[RecordedResponse]]:
    """Every response the recorded backend gave, by (tick, caller kind, agent), each
    list in attempt order."""
    responses: dict[Key, list[RecordedResponse]] = {}
    for frame in ticks:
        for call in (*frame.superseded, *frame.record.calls):
            if not reached_backend(call):
                continue
            assert call.admitted_at is not None
            if call.ok or call.reason == "invalid_output":  # answered, if not in shape
                kind: Literal["answer", "error", "refused", "unanswered"] = "answer"
            elif call.reason == "provider_error":
                kind = "error"
            elif call.reason == "platform_rejected":  # by the server: reached_backend
                kind = "refused"
            else:  # call_timeout, cancelled: cut off while the backend was still at it
                kind = "unanswered"
            response = RecordedResponse(
                kind=kind,
                attempt=call.attempts - 1,
                opened_at=call.admitted_at,
                finished_at=call.finished_at,
                text=call.text,
                input_tokens=call.input_tokens,
                output_tokens=call.output_tokens,
                error=call.error,
            )
            responses.setdefault((call.tick, call.caller, call.agent), []).append(response)
    for found in responses.values():
        found.sort(key=lambda response: response.attempt)
    return responses


@final
@attrs.define(eq=False)
class ReplayBackend(Provider):
    """A backend that replays a recording, under the virtual clock.

    A call gets the response recorded for its (tick, caller kind, agent, attempt) — or,
    when a what-if replay makes a try the recording did not (a retry, a first try that
    the recording's platform rejected), the same call's response from another try. The
    response comes after the time the recorded backend took; a recorded error is raised
    as ``ProviderError``; a call the recording cut off never answers.

    A call with no recorded response at all (it never reached the backend in the
    recording) is answered by ``fallback`` — the scene's simulated backend, seeded as
    the recording was — and counted in ``drawn``.

    Args:
        responses: from ``recorded_responses``; each response is used once.
        fallback: answers the calls the recording has no response for.
    """

    responses: dict[Key, list[RecordedResponse]] = attrs.field(converter=lambda r: {k: list(v) for k, v in r.items()})
    fallback: Provider
    _drawn: int = attrs.field(default=0, init=False)

    @property
    def drawn(self) -> int:
        """Calls answered by the fallback so far."""
        return self._drawn

    async def invoke(self, request: Request) -> AsyncGenerator[Event, None]:
        response = self._take(request)
        if response is None:
            self._drawn += 1
            async with aclosing(self.fallback.invoke(request)) as events:
                async for event in events:
                    yield event
            return
        if response.kind == "unanswered":
            await trio.sleep_forever()
        if trio.current_time() == response.opened_at:
            # Opened when it was in the recording: end exactly when it did. (now +
            # (end - now) is not always end in floating point, and a verifying replay
            # must reproduce the recorded clock to the bit.)
            await trio.sleep_until(response.finished_at)
        else:
            await trio.sleep(response.latency)
        if response.kind == "error":
            raise ProviderError(response.error or "the recorded backend failed this call")
        if response.kind == "refused":
            raise SessionLimitError(response.error or "the recorded server refused this call", refused_by="server")
        yield Started()
        yield TextDelta(response.text)
        yield Done(text=response.text, usage=Usage(input_tokens=response.input_tokens, output_tokens=response.output_tokens))

    def _take(self, request: Request) -> RecordedResponse | None:
        found = self.responses.get((request.tick, request.caller, request.agent))
        if not found:
            return None
        for index, response in enumerate(found):
            if response.attempt == request.attempt:
                return found.pop(index)
        return found.pop(0)
