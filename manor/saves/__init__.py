"""Save files: a run recorded tick by tick — data at rest, knowing no engine.

    format        what a save holds: header (versioned), tick frames, end frame
    framing       length + checksum per frame: a killed run keeps its whole ticks
    writer        SaveWriter, the instrument that writes a run as it goes
    reader        read_save: every broken file ends in one SaveError line
    validation    every value a save holds, checked like the files it came from
    chrome_trace  the run as a Chrome trace (Perfetto, chrome://tracing)

Running a save again (replay, "what if", the story retold) is ``manor.replay``.
"""

from .chrome_trace import chrome_trace, write_trace
from .format import FORMAT_VERSION, EndFrame, Header, TickFrame
from .reader import Save, decode_save, read_save
from .writer import SaveWriter

__all__ = [
    "FORMAT_VERSION",
    "EndFrame",
    "Header",
    "Save",
    "SaveWriter",
    "TickFrame",
    "chrome_trace",
    "decode_save",
    "read_save",
    "write_trace",
]
