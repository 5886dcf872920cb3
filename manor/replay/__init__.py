"""Running a save again: its recorded ticks replayed exactly (``--verify``) or under other
settings ("what if"), and its story retold from the recorded calls.

    recorded    the recorded run's settings, as sources a replay resolves again, and its figures
    responses   ReplayBackend, the provider that answers with the recorded responses
    admissions  one world of a fleet, each call admitted when the shared gate admitted it
    run         replay(): the recorded ticks again, verified or under other settings
    retelling   the run's story, rebuilt from the calls: Markdown, text, JSON Lines
    benchmark   replay speed and save size, for ``manor bench``
"""

from .benchmark import replay_benchmark
from .recorded import recorded_config, recorded_summary
from .responses import RecordedResponse, ReplayBackend, recorded_responses
from .retelling import story_lines, story_text, write_story
from .run import Mismatch, Replay, replay

__all__ = [
    "Mismatch",
    "RecordedResponse",
    "Replay",
    "ReplayBackend",
    "recorded_config",
    "recorded_responses",
    "recorded_summary",
    "replay",
    "replay_benchmark",
    "story_lines",
    "story_text",
    "write_story",
]
