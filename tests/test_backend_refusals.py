"""How a server's refusals are read (``providers.http``): ``Retry-After`` and the rate
headers, final caps, refused keys; through the openai backend against serve-agent."""

from __future__ import annotations

import email.utils
import time

import httpx
import pytest
from agent_servers import serving
from hypothesis import given
from hypothesis import strategies as st

from manor.calls import RateLimits, Request
from manor.errors import AccessRefused, ProviderError, SessionLimitError
from manor.providers.http import rate_limits, refusal, retry_after
from manor.providers.openai import OpenAIProvider
from manor.worlds.manor import CallerKind


class TestRetryAfter:
    def test_seconds_an_http_date_and_milliseconds(self) -> None:
        assert retry_after(httpx.Headers({"Retry-After": "7"})) == 7.0
        assert retry_after(httpx.Headers({"retry-after-ms": "250", "retry-after": "7"})) == 0.25
        date = email.utils.formatdate(time.time() + 120, usegmt=True)
        assert 115 < retry_after(httpx.Headers({"retry-after": date})) <= 120  # type: ignore[operator]
        assert retry_after(httpx.Headers({"retry-after": "soon"})) is None
        assert retry_after(httpx.Headers({})) is None

    @given(st.floats(min_value=0, max_value=1e6, allow_nan=False))
    def test_any_number_of_seconds_is_read_back(self, seconds: float) -> None:
        assert retry_after({"retry-after": repr(seconds)}) == seconds


class TestRateLimits:
    def test_openai_headers_with_durations(self) -> None:
        headers = {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "6m0s",
                   "x-ratelimit-remaining-tokens": "1500", "x-ratelimit-reset-tokens": "20ms"}  # fmt: skip
        assert rate_limits(headers) == RateLimits(requests_remaining=0, requests_reset_s=360.0, tokens_remaining=1500, tokens_reset_s=0.02)

    def test_anthropic_headers_with_instants(self) -> None:
        reset = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 60))
        limits = rate_limits({"anthropic-ratelimit-requests-remaining": "3", "anthropic-ratelimit-requests-reset": reset})
        assert limits is not None and limits.requests_remaining == 3 and 55 < limits.requests_reset_s <= 60  # type: ignore[operator]

    def test_none_without_headers(self) -> None:
        assert rate_limits({"content-type": "application/json"}) is None

    @given(st.integers(0, 99), st.integers(0, 59), st.integers(0, 999))
    def test_any_duration_is_its_seconds(self, minutes: int, seconds: int, millis: int) -> None:
        limits = rate_limits({"x-ratelimit-reset-requests": f"{minutes}m{seconds}s{millis}ms"})
        assert limits is not None and limits.requests_reset_s == pytest.approx(minutes * 60 + seconds + millis / 1000)


class TestRefusal:
    @pytest.mark.parametrize(
        ("status", "kind", "code", "cls", "final"),
        [
            (429, "rate_limit_error", None, SessionLimitError, False),
            (429, "rate_limit_error", "enforced_spend_limit_reached", SessionLimitError, True),
            (429, "insufficient_quota", "insufficient_quota", SessionLimitError, True),
            (529, "overloaded_error", None, SessionLimitError, False),
            (200, "overloaded_error", None, SessionLimitError, False),  # an error event mid-stream
            (401, "authentication_error", None, AccessRefused, True),
            (403, "permission_error", None, AccessRefused, True),
            (500, "api_error", None, ProviderError, False),
            (404, "not_found_error", None, ProviderError, False),
        ],
    )
    def test_each_status(self, status: int, kind: str, code: str | None, cls: type, final: bool) -> None:
        error = refusal("m at x", status, {"retry-after": "2"}, kind, code, "said")
        assert type(error) is cls and error.final is final
        if isinstance(error, SessionLimitError):
            assert error.refused_by == "server" and error.retry_after == 2.0


def _request(prompt: str) -> Request:
    return Request(caller=CallerKind.NARRATOR, agent="narrator", prompt=prompt)


@pytest.mark.trio
async def test_the_openai_backend_reads_a_quota_cap_as_final_and_a_refused_key_as_access_refused() -> None:
    async with serving() as (url, _):
        provider = OpenAIProvider(f"{url}/v1", model="m")
        with pytest.raises(SessionLimitError, match="no retry will help: You exceeded your current quota") as capped:
            async for _ in provider.invoke(_request("hi @status=429 @spend-cap")):
                pass
        with pytest.raises(AccessRefused, match="HTTP 401 access refused"):
            async for _ in provider.invoke(_request("hi @status=401")):
                pass
    assert capped.value.final
