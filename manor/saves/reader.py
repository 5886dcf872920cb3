"""Reading a save file: every way it can be broken ends in one ``SaveError`` line."""

from __future__ import annotations

import math
from pathlib import Path
from typing import final

import attrs
import msgspec

from ..content import Scene
from ..errors import REASONS, SaveError, one_line
from ..records import CallRecord, TickRecord
from ..version import engine_version
from ..wording import counted
from .format import FORMAT_VERSION, VERSIONS, EndFrame, Header, TickFrame, frame_decoder, header_decoder, probe_version, upgrade, upgrade_frame
from .framing import SIGNATURE, CorruptFrame, FrameReader
from .validation import check_changes, check_header

__all__ = ["Save", "decode_save", "read_save"]

# What msgspec raises on bytes that are not the struct asked for. RecursionError: a
# payload nested deeper than the decoder's stack allows.
_UNDECODABLE = (msgspec.DecodeError, RecursionError)


@final
@attrs.frozen
class Save:
    """A save file, read and checked.

    Attributes:
        name: the file, as messages name it.
        header: the header, upgraded to the current format version.
        ticks: every whole tick, in order (tick 1, 2, ...).
        finished: the run ended normally (an end frame closes the file); a run that was
            killed leaves no end frame.
        size: the file's size in bytes.
        warnings: what the reader let pass (a torn last frame), one line each.
    """

    name: str
    header: Header
    ticks: tuple[TickFrame, ...]
    finished: bool
    size: int
    warnings: tuple[str, ...] = ()

    @property
    def scene(self) -> Scene:
        return self.header.scene

    @property
    def records(self) -> list[TickRecord]:
        return [frame.record for frame in self.ticks]

    def require_ticks(self) -> None:
        """Raises:
        SaveError: the save holds no whole tick (the run was killed during its first).
        """
        if not self.ticks:
            raise SaveError(f"{self.name}: holds no whole tick (the run ended during its first tick)")


def read_save(path: str | Path) -> Save:
    """Read and check the save file at ``path``.

    Raises:
        SaveError: the file is missing, unreadable, not a save, corrupt, truncated inside
            its header, or written in a newer format. The message names the file.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise SaveError(f"{path}: no such save file") from None
    except IsADirectoryError:
        raise SaveError(f"{path}: is a directory, not a save file") from None
    except OSError as exc:
        raise SaveError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return decode_save(data, str(path))


def decode_save(data: bytes, name: str) -> Save:
    """Decode and check a save file's bytes; ``name`` is what messages call the file.

    A torn last frame (a run killed mid-write) is dropped with a warning in
    ``Save.warnings``; the whole frames before it are kept.

    Raises:
        SaveError: see ``read_save``.
    """
    if not data:
        raise SaveError(f"{name}: empty file, not a Manor save")
    if not data.startswith(SIGNATURE):
        if SIGNATURE.startswith(data):
            raise SaveError(f"{name}: truncated: the file ends inside the save signature")
        raise SaveError(f"{name}: not a Manor save file (it does not start with the save signature)")
    reader = FrameReader(data)
    frames = iter(reader)
    try:
        version, header = _header(next(frames, None), name, reader)
        ticks: list[TickFrame] = []
        finished = False
        decoder = frame_decoder(version)
        for index, payload in enumerate(frames, start=1):
            try:
                frame = upgrade_frame(version, decoder.decode(payload))
            except _UNDECODABLE as exc:
                raise SaveError(f"{name}: corrupt: frame {index} is not a tick or end frame: {one_line(exc)}") from None
            if isinstance(frame, EndFrame):
                if frame.ticks != len(ticks):
                    raise SaveError(f"{name}: corrupt: the end frame counts {counted(frame.ticks, 'tick')}, the file holds {len(ticks)}")
                finished = True
                break  # whatever follows is checked below, as bytes, not as frames
            _check_tick(frame, len(ticks) + 1, header, name)
            check_changes(frame, name)
            ticks.append(frame)
    except CorruptFrame as exc:
        raise SaveError(f"{name}: corrupt: {one_line(exc)}") from None
    if finished and reader.end < len(data):
        # Not a torn frame: a writer killed mid-write never got to write the end frame.
        raise SaveError(
            f"{name}: corrupt: {len(data) - reader.end} bytes follow the end frame (from byte {reader.end}); "
            f"a finished save ends with it"
        )
    warnings = []
    if reader.torn is not None:
        torn = reader.torn
        warnings.append(
            f"{name}: the last frame (from byte {torn.offset}) is torn, {torn.missing} bytes short — the run was "
            f"killed while writing it; keeping the {len(ticks)} whole ticks before it"
        )
    return Save(name=name, header=header, ticks=tuple(ticks), finished=finished, size=len(data), warnings=tuple(warnings))


def _header(payload: bytes | None, name: str, reader: FrameReader) -> tuple[int, Header]:
    """The file's format version and its header, upgraded."""
    if payload is None:
        if reader.torn is not None:
            raise SaveError(f"{name}: truncated: the file ends inside its header ({len(reader.data)} bytes)")
        raise SaveError(f"{name}: truncated: the file holds no header")
    try:
        version = probe_version(payload)
    except _UNDECODABLE:
        raise SaveError(f"{name}: not a Manor save: its first frame is not a save header") from None
    if version > FORMAT_VERSION:
        raise SaveError(
            f"{name}: save format {version} is newer than this Manor ({engine_version()}) reads "
            f"(format {FORMAT_VERSION} and older); upgrade Manor to read it"
        )
    if version not in VERSIONS:
        raise SaveError(f"{name}: corrupt: unknown save format {version}")
    try:
        header = upgrade(header_decoder().decode(payload))
    except _UNDECODABLE as exc:
        raise SaveError(f"{name}: corrupt: bad save header (format {version}): {one_line(exc)}") from None
    check_header(header, name)
    return version, header


def _check_tick(frame: TickFrame, expected: int, header: Header, name: str) -> None:
    """A tick frame is tick ``expected``, and every call in it could have happened."""
    record = frame.record
    where = f"{name}: corrupt: tick {record.tick}"
    if record.tick != expected:
        raise SaveError(f"{name}: corrupt: frame {expected} holds tick {record.tick}, expected tick {expected}")
    if not (math.isfinite(record.started_at) and math.isfinite(record.finished_at)):
        raise SaveError(f"{where}: its start or end is not a finite time")
    agents = header.scene.agents
    for call in (*record.calls, *frame.superseded):
        problem = _call_problem(call, expected, agents, header.world_callers)
        if problem:
            raise SaveError(f"{where}: {problem}")


def _call_problem(call: CallRecord, tick: int, agents: dict[str, object], callers: tuple[str, ...]) -> str | None:
    if call.tick != tick:
        return f"a call of {call.agent} says it belongs to tick {call.tick}"
    if call.caller not in callers:
        return f"unknown caller kind '{call.caller}'"
    if call.agent not in agents:
        return f"agent '{call.agent}' is not in the saved scene"
    if (call.outcome == "ok") != (call.reason is None) or (call.reason is not None and call.reason not in REASONS):
        return f"a call of {call.agent} has outcome '{call.outcome}' with reason {call.reason!r}"
    if (call.refused_by is not None) != (call.reason == "platform_rejected"):
        return f"a call of {call.agent} with reason {call.reason!r} says it was refused by {call.refused_by!r}"
    if call.refused_by == "server" and call.admitted_at is None:
        return f"a call of {call.agent} was refused by the server without ever reaching it"
    times = (call.queued_at, call.finished_at, 0.0 if call.admitted_at is None else call.admitted_at)
    if not all(math.isfinite(t) for t in times) or call.attempts < 1:
        return f"a call of {call.agent} has a time that is not finite or no attempt"
    return None
