"""The ``anthropic`` backend: Anthropic's Messages API, streamed, through the official SDK.

The SDK's ``AsyncAnthropic`` runs under trio (it is built on anyio): checked with
anthropic 2.17 against ``manor serve-agent``'s ``/v1/messages`` and a plain HTTP server.
It is an optional extra (``pip install 'manor[anthropic]'``) and is imported only when
a backend of this kind is built: it takes seconds to import.

The SDK's own retries are off (``max_retries=0``): whether and when to try again is the
gate's and the layers' business. Its errors are mapped at the boundary
(``providers.http.refusal``): a 429 is the platform's flow control (``SessionLimitError``
refused by the server, with ``retry-after`` and the rate headers), a 529 or an
``overloaded_error`` mid-stream is the service full for everyone (the same), a 429 for a
spend cap and a 401/403 are final: the run stops.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any, final

import attrs

from ..answers import prompt_with_schema
from ..calls import Done, Event, Request, Started, TextDelta, Usage
from ..errors import CallError, CallTimeout, ConfigError, ProviderError
from .provider import Provider
from .http import error_fields, rate_limits, refusal

if TYPE_CHECKING:
    import anthropic as sdk

__all__ = ["DEFAULT_KEY_ENV", "AnthropicProvider", "anthropic_client", "require_sdk"]

#: Where the key is read from unless the table names another variable.
DEFAULT_KEY_ENV = "ANTHROPIC_API_KEY"


def require_sdk() -> Any:
    """The ``anthropic`` module.

    Raises:
        ConfigError: it is not installed.
    """
    try:
        import anthropic
    except ImportError:
        raise ConfigError("a backend of kind 'anthropic' needs the anthropic package: pip install 'manor[anthropic]'") from None
    return anthropic


def anthropic_client(api_key_env: str, base_url: str, connect_timeout: float, read_timeout: float) -> sdk.AsyncAnthropic:
    """An SDK client with its retries off, its key from ``api_key_env``.

    Raises:
        ConfigError: the SDK is not installed, or the variable is not set.
    """
    anthropic = require_sdk()
    key = os.environ.get(api_key_env)
    if not key:
        raise ConfigError(f"environment variable {api_key_env} (the Anthropic API key) is not set")
    timeout = anthropic.Timeout(read_timeout, connect=connect_timeout)
    return anthropic.AsyncAnthropic(api_key=key, base_url=base_url or None, max_retries=0, timeout=timeout)


@final
@attrs.define(eq=False)
class AnthropicProvider(Provider):
    """Messages at ``{base_url}/v1/messages``, always streamed.

    Args:
        client: the SDK client (``anthropic_client``), shared by the backend's calls.
        model: used when the request names none.
        what: names the service in messages (the base URL, never the key).
        system: a system prompt ("" = none).
        max_tokens: the longest answer asked for (the API requires one).
    """

    client: sdk.AsyncAnthropic
    model: str = ""
    what: str = "api.anthropic.com"
    system: str = ""
    max_tokens: int = attrs.field(default=1024, validator=attrs.validators.ge(1))

    async def invoke(self, request: Request) -> AsyncGenerator[Event, None]:
        model = request.model or self.model
        if not model:
            unset = ProviderError("no model configured for the anthropic backend: set its table's model, or the agent file's")
            unset.final = True  # every call of this agent would fail the same way
            raise unset
        anthropic = require_sdk()
        what = f"{model} at {self.what}"
        prompt = prompt_with_schema(request.prompt, request.shape)
        options: dict[str, Any] = {"system": self.system} if self.system else {}
        try:
            stream_of = self.client.messages.stream(
                model=model, max_tokens=self.max_tokens, messages=[{"role": "user", "content": prompt}], **options
            )
            async with stream_of as stream:
                yield Started()
                pieces: list[str] = []
                async for text in stream.text_stream:
                    if text:
                        pieces.append(text)
                        yield TextDelta(text)
                message = await stream.get_final_message()
                rates = rate_limits(stream.response.headers)
        except anthropic.APIStatusError as exc:
            raise _status_error(what, exc) from None
        except anthropic.APITimeoutError as exc:
            raise CallTimeout(f"{what}: timed out: {exc}") from None
        except anthropic.AnthropicError as exc:
            raise ProviderError(f"{what}: {type(exc).__name__}: {exc}") from None
        usage = message.usage
        spent_in = usage.input_tokens + (usage.cache_creation_input_tokens or 0) + (usage.cache_read_input_tokens or 0)
        yield Done(text="".join(pieces), usage=Usage(input_tokens=spent_in, output_tokens=usage.output_tokens), rates=rates)


def _status_error(what: str, exc: sdk.APIStatusError) -> CallError:
    """The SDK's status error as Manor's: by status, or, for an ``event: error`` in a
    stream (status 200), by the error's type."""
    message, kind, code = error_fields(exc.body, str(exc.body or exc))
    return refusal(what, exc.status_code, exc.response.headers, kind or exc.type, code or exc.error_code, message)
