"""What a call record keeps of an error: one line, bounded, no secret."""

from __future__ import annotations

import base64
import io
import json
import random
import re
import urllib.parse
from collections.abc import Callable

import pytest
import trio
import trio.testing
from rich.console import Console

from manor.admission.gate import Gate
from manor.admission.limiter import SessionLimiter
from manor.calls import Request
from manor.cli.run_cmd import print_summary
from manor.errors import (
    ERROR_CHARS,
    ProviderError,
    SessionLimitError,
    add_secret,
    error_line,
)
from manor.layers import PlatformLayer, Stack
from manor.providers import MockProvider
from manor.records import CallRecord
from manor.tick.loop import TickLoop
from manor.tick.policies import Pipeline
from manor.tick.prediction import LatencyPredictor
from manor.tick.statistics import ErrorMessages, PlatformRejections, empty_degradations
from manor.worlds import load_scene
from manor.worlds.manor import CallerKind
from manor.worlds.manor import ManorWorld as World


class TestErrorLine:
    def test_control_characters_are_escaped(self) -> None:
        assert error_line(ProviderError("500: boom\nTraceback\x1b[31m")) == "500: boom\\nTraceback\\x1b[31m"

    def test_a_long_message_is_cut_with_an_ellipsis(self) -> None:
        line = error_line("x" * 1000)
        assert len(line) == ERROR_CHARS and line.endswith("…")
        assert error_line("y" * ERROR_CHARS) == "y" * ERROR_CHARS

    def test_a_registered_secret_is_masked(self) -> None:
        add_secret("sk-test-0123456789")
        assert error_line("401: bad key sk-test-0123456789 for model") == "401: bad key *** for model"

    @pytest.mark.parametrize(
        "spell",
        [
            lambda key: key,
            lambda key: json.dumps(key),
            lambda key: json.dumps(key, ensure_ascii=False),
            lambda key: urllib.parse.quote(key, safe=""),
            lambda key: urllib.parse.quote_plus(key),
            lambda key: urllib.parse.quote(key, safe="").replace("-", "%2D"),  # more than it must
            lambda key: re.sub("%[0-9A-F]{2}", lambda hexed: hexed[0].lower(), urllib.parse.quote(key, safe="")),
            lambda key: base64.b64encode(key.encode()).decode(),
            lambda key: base64.urlsafe_b64encode(key.encode()).decode().rstrip("="),
            lambda key: base64.b64encode(b"user:" + key.encode()).decode(),  # Basic auth, the key at an offset
            lambda key: base64.b64encode(b"ab:" + key.encode() + b"!").decode(),
        ],
        ids=["plain", "json", "json-utf8", "url", "url-plus", "url-every-dash", "url-lower-hex", "base64", "base64-url", "basic-auth", "base64-offset-2"],
    )
    def test_every_spelling_of_a_secret_is_masked(self, spell: Callable[[str], str]) -> None:
        """As the server may quote it back: the key's own characters are gone, whatever the spelling."""
        key = "sk-live/Ab+9 é\"q-0123456789"
        add_secret(key)
        quoted = spell(key)
        line = error_line(f"401: no such key {quoted} for this model")
        assert line.startswith("401: no such key ") and line.endswith(" for this model")
        assert "***" in line
        # Left around the mask: what encodes the bytes around the key (Basic auth's
        # "user:"), and base64's edge characters, each with fewer than 6 bits of the key.
        assert len(line) <= len("401: no such key *** for this model") + 4 * 6 // 3 + 4

    def test_short_values_are_not_masked(self) -> None:
        """A two-letter 'secret' would mask ordinary words."""
        add_secret("on")
        assert error_line("connection refused") == "connection refused"

    def test_an_empty_message_names_the_error(self) -> None:
        assert error_line(ProviderError()) == "ProviderError"


class TestRefusedBy:
    def test_the_limiter_says_it_refused(self) -> None:
        limiter = SessionLimiter(1)
        limiter.try_acquire()
        with pytest.raises(SessionLimitError) as caught:
            limiter.try_acquire()
        assert caught.value.refused_by == "limiter"

    def test_a_backends_refusal_is_the_servers(self) -> None:
        assert SessionLimitError("429 too many requests").refused_by == "server"


def _degraded(reason: str, error: str, caller: str = "character", refused_by: str | None = None, attempts: int = 1) -> CallRecord:
    return CallRecord(
        tick=1, ticket=None, caller=caller, agent="hobbes", queued_at=0.0, admitted_at=0.0, finished_at=1.0,
        outcome="degraded", reason=reason, error=error, refused_by=refused_by, attempts=attempts,  # type: ignore[arg-type]
    )  # fmt: skip


class TestCounting:
    def test_rejections_split_by_who_refused_and_retries_apart(self) -> None:
        rejections = PlatformRejections()
        rejections.count([
            _degraded("platform_rejected", "full", refused_by="limiter", attempts=3),
            _degraded("platform_rejected", "429", refused_by="server"),
            _degraded("gate_timeout", "no gate slot within 30s"),
        ])  # fmt: skip
        assert rejections.as_dict() == {"total": 2, "by_limiter": 1, "by_server": 1, "retried": 2}
        assert PlatformRejections.describe(rejections.as_dict()) == "2 (1 by limiter, 1 by server); 2 refused tries retried"

    def test_messages_are_counted_most_common_first_per_reason_and_caller(self) -> None:
        errors = ErrorMessages()
        for record in [
            _degraded("provider_error", "500: a"), _degraded("provider_error", "500: b"), _degraded("provider_error", "500: b"),
            _degraded("gate_timeout", "no slot"), _degraded("provider_error", "500: a", caller="narrator"),
        ]:  # fmt: skip
            errors.count(record)
        assert errors.most_common() == [
            {"reason": "gate_timeout", "caller": "character", "message": "no slot", "count": 1},
            {"reason": "provider_error", "caller": "character", "message": "500: b", "count": 2},
            {"reason": "provider_error", "caller": "character", "message": "500: a", "count": 1},
            {"reason": "provider_error", "caller": "narrator", "message": "500: a", "count": 1},
        ]

    def test_distinct_messages_are_bounded(self) -> None:
        """A server that puts a request id in every message cannot grow the tally."""
        errors = ErrorMessages(kept=3)
        for i in range(10):
            errors.count(_degraded("provider_error", f"500: request {i} failed"))
        rows = errors.most_common(per_group=10)
        assert len(rows) == 4 and rows[0] == {"reason": "provider_error", "caller": "character", "message": ErrorMessages.OTHER, "count": 7}


async def _failing(request: Request) -> str:
    """A backend that fails with a message that holds a newline."""
    await trio.sleep(1)
    raise ProviderError("upstream said:\nno")


def test_the_run_table_ends_with_what_failed() -> None:
    """``manor run`` prints the most common messages, brackets and all."""
    summary = {
        "scene": "s", "ticks": 1, "policy": "pipeline", "gate_size": 5, "platform_limit": 6, "order": "fifo", "seed": 1,
        "calls": 2, "ok": 0, "degraded": 2, "platform_rejections": PlatformRejections().as_dict(),
        "peak_platform_sessions": 1, "tick_seconds": {"mean": 1, "p50": 1, "p95": 1, "max": 1},
        "tokens": {"input": 0, "output": 0}, "cost": 0, "world_hash": "h", "degradations": empty_degradations(),
        "errors": [{"reason": "provider_error", "caller": "narrator", "message": "[bench] 500: upstream failed", "count": 2}],
    }  # fmt: skip
    console = Console(width=160, file=io.StringIO(), color_system=None, markup=False)  # as output.console()
    print_summary(console, summary)
    out = console.file.getvalue()  # type: ignore[attr-defined]
    assert "what failed" in out
    assert next(line for line in out.splitlines() if "upstream" in line).split("│")[1:5] == [
        "     2 ", " provider_error ", " narrator ", " [bench] 500: upstream failed "
    ]


@pytest.mark.trio
async def test_a_degraded_record_keeps_its_message(autojump_clock: trio.testing.MockClock) -> None:
    limiter = SessionLimiter(0)
    stack = Stack(MockProvider(_failing), [PlatformLayer(limiter)])
    loop = TickLoop(
        world=World.from_scene(load_scene("tea_party"), random.Random(0)), gate=Gate(size=1), limiter=limiter, gated=stack, direct=stack,
        policy=Pipeline(), predictor=LatencyPredictor({}),
    )  # fmt: skip
    record = await loop.call(Request(caller=CallerKind.NARRATOR, agent="narrator"), stack)
    assert (record.reason, record.error, record.refused_by) == ("provider_error", "upstream said:\\nno", None)
