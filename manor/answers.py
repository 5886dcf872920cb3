"""Structured answers: a request may declare the shape of its answer as a msgspec Struct.

The backend is asked for JSON of that shape (the ``openai`` backend sends the JSON schema
as ``response_format``; the ``command`` and ``agno`` backends put it in the prompt), the
tick loop decodes and validates the answer with msgspec before the world sees it, and an
answer that does not fit degrades as ``invalid_output`` with the validation error kept
(``call.repair_attempts`` re-asks with the error quoted). The world then reads an ok
record's text with ``decode_answer``, which cannot fail for it.
"""

from __future__ import annotations

import functools
import json
import random
from collections.abc import Sequence
from typing import Any, TypeVar

import msgspec

from .draws import choice
from .errors import one_line

__all__ = [
    "InvalidAnswer",
    "answer_problem",
    "decode_answer",
    "draw_answer",
    "draw_from_schema",
    "prompt_with_schema",
    "repair_prompt",
    "response_format",
    "response_schema",
    "schema_in_prompt",
    "schema_instruction",
]

S = TypeVar("S")

#: How a model is told what to answer, where the schema goes in the prompt.
_INSTRUCTION_HEAD = "Answer with one JSON object and nothing else, matching this JSON schema:\n"


class InvalidAnswer(ValueError):
    """An answer that is not JSON of its request's shape; the message says why."""


@functools.cache
def _decoder(shape: type[S]) -> msgspec.json.Decoder[S]:
    return msgspec.json.Decoder(shape)


def decode_answer(text: str, shape: type[S]) -> S:
    """``text`` decoded and validated as ``shape``. Surrounding whitespace and a Markdown
    code fence around the JSON (```json … ```), which chat models add unasked, are
    ignored; nothing else is forgiven.

    Raises:
        InvalidAnswer: not JSON, or JSON that does not fit ``shape`` (msgspec's message:
            "Expected `str`, got `int` - at `$.target`").
    """
    body = text.strip()
    if body.startswith("```"):
        body = body.removeprefix("```").removeprefix("json").removesuffix("```").strip()
    try:
        return _decoder(shape).decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise InvalidAnswer(one_line(exc)) from None


def answer_problem(text: str, shape: type) -> str | None:
    """Why ``text`` is not an answer of ``shape``, or ``None`` if it is one."""
    try:
        decode_answer(text, shape)
    except InvalidAnswer as exc:
        return str(exc)
    return None


@functools.cache
def response_schema(shape: type) -> dict[str, Any]:
    """The JSON schema of ``shape`` as one object (its own definition at the top, the
    Structs it uses under ``$defs``): what ``response_format`` and prompts carry."""
    (top,), components = msgspec.json.schema_components([shape], ref_template="#/$defs/{name}")
    name = top["$ref"].rsplit("/", 1)[-1]
    schema = dict(components.pop(name))
    if components:
        schema["$defs"] = components
    return schema


def response_format(shape: type) -> dict[str, Any]:
    """The OpenAI chat-completions ``response_format`` asking for JSON of ``shape``.

    Not ``strict``: OpenAI's strict mode refuses schemas with optional fields, which
    Structs with defaults have; the answer is validated here either way.
    """
    return {"type": "json_schema", "json_schema": {"name": shape.__name__, "schema": response_schema(shape)}}


def schema_instruction(shape: type) -> str:
    """What to add to a prompt so that a backend without structured output answers in
    ``shape``: a sentence and the schema as one line of JSON."""
    return _INSTRUCTION_HEAD + json.dumps(response_schema(shape), separators=(",", ":"))


def prompt_with_schema(prompt: str, shape: type | None) -> str:
    """``prompt`` as a backend without structured output (``command``, ``agno``) sends
    it: with ``schema_instruction`` after it when the request has a shape."""
    return prompt if shape is None else f"{prompt}\n\n{schema_instruction(shape)}"


def schema_in_prompt(prompt: str) -> dict[str, Any] | None:
    """The schema a prompt made by ``prompt_with_schema`` asks for, or ``None``: how
    ``manor serve-agent``'s simulated model follows the instruction, as a real one
    would (whitespace may have been folded on the way, as its directives parser does)."""
    _, head, rest = prompt.rpartition(_INSTRUCTION_HEAD.rstrip())
    if not head:
        return None
    try:
        schema, _ = json.JSONDecoder().raw_decode(rest.lstrip())
    except ValueError:
        return None
    return schema if isinstance(schema, dict) else None


def repair_prompt(prompt: str, answer: str, problem: str) -> str:
    """The prompt of a repair: the original, the answer given, and what was wrong."""
    return (
        f"{prompt}\n\nYour previous answer was not valid.\nIt was: {one_line(answer)[:500]}\n"
        f"The problem: {problem}\nAnswer again with valid JSON only."
    )


def draw_answer(shape: type, rng: random.Random, words: Sequence[str]) -> str:
    """A valid JSON answer of ``shape``, drawn with ``rng``: an ``enum`` gives one of its
    values, a string is drawn from ``words`` (the scene's content), an optional field is
    sometimes left out, a number or a string's length kept within the bounds its
    ``Meta`` sets. The simulator's answer to a shaped request. A string's ``pattern``
    is not drawn to fit: give such choices as a ``Literal`` (an ``enum``)."""
    return draw_from_schema(response_schema(shape), rng, words)


def draw_from_schema(schema: dict[str, Any], rng: random.Random, words: Sequence[str]) -> str:
    """``draw_answer`` for a JSON schema as ``response_schema`` makes it (definitions
    under ``$defs``): what a server that is handed only the schema can draw."""
    return json.dumps(_draw(schema, schema.get("$defs", {}), rng, words))


def _draw(schema: dict[str, Any], defs: dict[str, Any], rng: random.Random, words: Sequence[str]) -> Any:
    if "$ref" in schema:
        return _draw(defs[schema["$ref"].rsplit("/", 1)[-1]], defs, rng, words)
    if "enum" in schema:
        return choice(rng, schema["enum"])
    if "const" in schema:
        return schema["const"]
    if "anyOf" in schema:
        options = schema["anyOf"]
        concrete = [option for option in options if option.get("type") != "null"]
        if len(concrete) < len(options) and rng.random() < 0.25:
            return None
        return _draw(choice(rng, concrete or options), defs, rng, words)
    kind = schema.get("type")
    if kind == "object":
        required = set(schema.get("required", ()))
        return {
            name: _draw(field, defs, rng, words)
            for name, field in schema.get("properties", {}).items()
            if name in required or rng.random() < 0.5
        }
    if kind == "array":
        low = schema.get("minItems", 0)
        high = max(low, min(schema.get("maxItems", 3), 3))
        return [_draw(schema.get("items", {}), defs, rng, words) for _ in range(rng.randint(low, high))]
    if kind == "integer":
        return rng.randint(*_bounds(schema, step=1, span=10))
    if kind == "number":
        low, high = _bounds(schema, step=0.001, span=1.0)
        return min(max(round(rng.uniform(low, high), 3), low), high)
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "null":
        return None
    return _string(schema, rng, words)


def _bounds(schema: dict[str, Any], *, step: float, span: float) -> tuple[Any, Any]:
    """The values a number's schema allows, inclusive, as ``randint`` or ``uniform``
    takes them: 0 to ``span`` where it sets neither bound, else ``span`` wide from the
    one it sets (``Meta(ge=20)``, span 10: 20 to 30); an exclusive bound is moved in by
    ``step`` (1 for integers; for numbers a thousandth, as the draw is rounded to)."""
    low = schema.get("minimum", schema["exclusiveMinimum"] + step if "exclusiveMinimum" in schema else None)
    high = schema.get("maximum", schema["exclusiveMaximum"] - step if "exclusiveMaximum" in schema else None)
    if low is None:
        low = 0 if high is None or high >= 0 else high - span
    if high is None:
        high = span if low <= span else low + span
    return low, high


def _string(schema: dict[str, Any], rng: random.Random, words: Sequence[str]) -> str:
    """A line of the scene's, long enough for ``minLength`` (more lines joined) and cut
    to ``maxLength``."""
    def line() -> str:
        return choice(rng, words) if words else "something"

    text = line()
    while len(text) < schema.get("minLength", 0):
        text = f"{text} {line()}"
    return text[: schema["maxLength"]] if "maxLength" in schema else text
