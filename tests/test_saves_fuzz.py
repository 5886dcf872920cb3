"""Fuzzing the save reader: whatever the bytes, the only exception is SaveError.

Four kinds of input, from blunt to sly: random bytes; random bytes after a good
signature; a real save with bytes flipped, cut, inserted or deleted; and a real save
whose decoded frames are altered — any value anywhere swapped for any other — and then
framed again with *good* checksums, so that the decoders and the checks behind the
framing are what is tested. A save the reader accepts must also export as a trace and
give its recorded figures without an error.
"""

from __future__ import annotations

import math
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from saves_fixture import frames_of, record, reframe

from manor.errors import SaveError
from manor.replay import recorded_summary
from manor.saves import chrome_trace, decode_save
from manor.saves.framing import SIGNATURE

_SETTINGS = settings(max_examples=250, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.fixture(scope="module")
def small_save(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """Three legacy ticks of the tea party: some calls degrade, some retry."""
    path = tmp_path_factory.mktemp("fuzz") / "small.msav"
    record(path, run__scene="tea_party", run__policy="legacy", run__ticks=3, platform__limit=2)
    return path.read_bytes()


def check(data: bytes) -> None:
    """The property: SaveError or a save that can be used."""
    try:
        save = decode_save(data, "fuzz.msav")
    except SaveError as exc:
        message = str(exc)
        assert message.startswith("fuzz.msav: ") and "\n" not in message
        return
    json_ready = chrome_trace(save)
    assert len(json_ready["traceEvents"]) >= len(save.ticks)
    if save.ticks:
        try:
            recorded_summary(save)
        except SaveError:
            pass  # a recorded setting with a value this Manor refuses: named, one line


_msgpack_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats() | st.text(max_size=20) | st.binary(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=8,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every position inside a decoded frame: keys of maps, indices of arrays."""
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*prefix, index))
    return found


def _replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _replace(value[head], rest, new)}
    copy = list(value)
    copy[head] = _replace(copy[head], rest, new)
    return copy


@_SETTINGS
@given(st.binary(max_size=4096))
def test_random_bytes(data: bytes) -> None:
    check(data)


@_SETTINGS
@given(st.binary(max_size=4096))
def test_random_bytes_after_a_good_signature(data: bytes) -> None:
    check(SIGNATURE + data)


@_SETTINGS
@given(data=st.data())
def test_a_real_save_with_damaged_bytes(small_save: bytes, data: st.DataObject) -> None:
    damaged = bytearray(small_save)
    for _ in range(data.draw(st.integers(1, 4), label="damages")):
        at = data.draw(st.integers(0, max(0, len(damaged) - 1)), label="at")
        how = data.draw(st.sampled_from(["flip", "cut", "insert", "delete"]), label="how")
        if how == "flip" and damaged:
            damaged[at] ^= data.draw(st.integers(1, 255), label="mask")
        elif how == "cut":
            del damaged[at:]
        elif how == "insert":
            damaged[at:at] = data.draw(st.binary(min_size=1, max_size=16), label="inserted")
        else:
            del damaged[at : at + data.draw(st.integers(1, 64), label="deleted")]
    check(bytes(damaged))


@_SETTINGS
@given(data=st.data())
def test_a_real_save_with_altered_frames_and_good_checksums(small_save: bytes, data: st.DataObject) -> None:
    frames = [msgspec.msgpack.decode(payload) for payload in frames_of(small_save)]
    for _ in range(data.draw(st.integers(1, 3), label="alterations")):
        index = data.draw(st.integers(0, len(frames) - 1), label="frame")
        path = data.draw(st.sampled_from(_paths(frames[index])), label="path")
        frames[index] = _replace(frames[index], path, data.draw(_msgpack_values, label="value"))
    check(reframe([msgspec.msgpack.encode(frame) for frame in frames]))


@_SETTINGS
@given(payloads=st.lists(st.binary(max_size=256), max_size=4), keep=st.integers(0, 5))
def test_a_real_save_with_random_frames_and_good_checksums(small_save: bytes, payloads: list[bytes], keep: int) -> None:
    """Whole frames of random bytes, after the real header and some real ticks."""
    check(reframe([*frames_of(small_save)[: keep + 1], *payloads]))


def test_the_unaltered_small_save_is_accepted(small_save: bytes) -> None:
    """The fuzzing starts from a good save (so that its mutations mean something)."""
    save = decode_save(small_save, "fuzz.msav")
    assert len(save.ticks) == 3 and save.finished
    assert any(not call.ok for frame in save.ticks for call in frame.record.calls)
    assert not math.isnan(recorded_summary(save)["tick_seconds"]["mean"])
