"""How a save file is cut into frames, so that a run killed mid-write keeps its ticks.

A file is a signature followed by frames. Each frame is a 12-byte head, then its
payload::

    u32 length   u32 crc32(payload)   u32 crc32(length, crc32(payload))   payload

all little-endian. The head checks itself, so a damaged length is told apart from a
file that simply ends early:

- the file ends inside a head, or inside a payload whose head is sound: the last frame
  is *torn* (the writer was killed mid-write). The frames before it are whole; the
  reader keeps them and says so.
- a head or a payload fails its checksum: the file is *corrupt*; nothing is trusted.

A writer appends each frame with a single ``write`` and flushes it, so a killed run
leaves at most its last frame torn.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from typing import BinaryIO, final

import attrs

__all__ = ["HEAD_SIZE", "SIGNATURE", "CorruptFrame", "FrameReader", "TornFrame", "encode_frame", "write_frame"]

#: The first bytes of every save file. Like PNG's: a high byte to catch 7-bit
#: transports, CR LF and LF to catch newline translation.
SIGNATURE = b"\x89MSAVE\r\n\x1a\n"

_HEAD = struct.Struct("<III")
_CHECKED = struct.Struct("<II")
HEAD_SIZE = _HEAD.size


def encode_frame(payload: bytes) -> bytes:
    """The frame holding ``payload``: its head, then the payload."""
    length, crc = len(payload), zlib.crc32(payload)
    return _HEAD.pack(length, crc, zlib.crc32(_CHECKED.pack(length, crc))) + payload


def write_frame(file: BinaryIO, payload: bytes) -> int:
    """Append one frame in a single write and flush it; return its size in bytes.

    Raises:
        OSError: the write failed.
    """
    frame = encode_frame(payload)
    file.write(frame)
    file.flush()
    return len(frame)


@attrs.frozen
class TornFrame:
    """The file ended inside frame ``index``, which began at byte ``offset``."""

    index: int
    offset: int
    missing: int


class CorruptFrame(Exception):
    """Frame ``index`` at byte ``offset`` fails its checksum; ``part`` says which."""

    def __init__(self, index: int, offset: int, part: str) -> None:
        super().__init__(f"frame {index} at byte {offset}: its {part} fails its checksum")
        self.index = index
        self.offset = offset
        self.part = part


@final
@attrs.define(eq=False)
class FrameReader:
    """The frames of a file's bytes, after its signature.

    Iterate for each whole frame's payload; ``torn`` is set when the file ended inside
    the last one. ``end`` is where the last frame yielded ends (it is set before the
    payload is handed out, so a reader that stops at a frame knows what follows it).

    Raises:
        CorruptFrame: (from iteration) a frame's head or payload fails its checksum.
    """

    data: bytes
    torn: TornFrame | None = attrs.field(default=None, init=False)
    end: int = attrs.field(default=len(SIGNATURE), init=False)

    def __iter__(self) -> Iterator[bytes]:
        data, size = self.data, len(self.data)
        offset, index = len(SIGNATURE), 0
        while offset < size:
            if size - offset < HEAD_SIZE:
                self.torn = TornFrame(index, offset, HEAD_SIZE - (size - offset))
                return
            length, crc, head_crc = _HEAD.unpack_from(data, offset)
            if zlib.crc32(data[offset : offset + _CHECKED.size]) != head_crc:
                raise CorruptFrame(index, offset, "head")
            start = offset + HEAD_SIZE
            if start + length > size:
                self.torn = TornFrame(index, offset, start + length - size)
                return
            payload = data[start : start + length]
            if zlib.crc32(payload) != crc:
                raise CorruptFrame(index, offset, "payload")
            self.end = start + length
            yield payload
            offset, index = start + length, index + 1
