"""Save files: a run recorded tick by tick, replayed exactly or "what if", exported as a
trace.

    format      what a save holds: header (versioned), tick frames, end frame
    framing     length + checksum per frame: a killed run keeps its whole ticks
    writer      SaveWriter, the instrument that writes a run as it goes
    reader      read_save: every broken file ends in one SaveError line
    validation  every value a save holds, checked like the files it came from
    backend     ReplayBackend, the provider that answers with the recorded responses
    recorded    the recorded run's settings and figures
    replay      replay(): the recorded ticks again, verified or under other settings
    trace       the run as a Chrome trace (Perfetto, chrome://tracing)
    story       the run's story, rebuilt from the calls: Markdown, text, JSON Lines
    benchmark   replay speed and save size, for ``manor bench``
"""

from .backend import RecordedResponse, ReplayBackend, recorded_responses
from .benchmark import replay_benchmark
from .format import FORMAT_VERSION, EndFrame, Header, TickFrame
from .reader import Save, decode_save, read_save
from .recorded import recorded_config, recorded_summary
from .replay import Mismatch, Replay, replay
from .story import story_lines, story_text, write_story
from .trace import chrome_trace, write_trace
from .writer import SaveWriter

__all__ = [
    "FORMAT_VERSION",
    "EndFrame",
    "Header",
    "Mismatch",
    "RecordedResponse",
    "Replay",
    "ReplayBackend",
    "Save",
    "SaveWriter",
    "TickFrame",
    "chrome_trace",
    "decode_save",
    "read_save",
    "recorded_config",
    "recorded_responses",
    "recorded_summary",
    "replay",
    "replay_benchmark",
    "story_lines",
    "story_text",
    "write_story",
    "write_trace",
]
