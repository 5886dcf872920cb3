"""Running a save again: its recorded ticks replayed exactly (``--verify``) or under other
settings ("what if"), and its story retold from the recorded calls.

    recorded    RecordedRun: a save's settings, figures and the engine that runs it again, built once
    checking    RecordingCheck: each replayed tick against the recorded one and its world's plan
    changes     LiveChanges: the recorded live changes, made again
    responses   ReplayBackend, the provider that answers with the recorded responses
    admissions  a save whose gate was shared (a fleet's world, a gate on Redis), each call admitted when it was
    run         replay(): the recorded ticks again, verified or under other settings
    retelling   the run's story, rebuilt from the calls: Markdown, text, JSON Lines
    benchmark   replay speed and save size, for ``manor bench``
"""

from .benchmark import replay_benchmark
from .checking import Mismatch
from .recorded import RecordedRun, recorded_summary
from .responses import RecordedResponse, ReplayBackend, recorded_responses
from .retelling import story_lines, story_text, write_story
from .run import Replay, replay

__all__ = [
    "Mismatch",
    "RecordedResponse",
    "RecordedRun",
    "Replay",
    "ReplayBackend",
    "recorded_responses",
    "recorded_summary",
    "replay",
    "replay_benchmark",
    "story_lines",
    "story_text",
    "write_story",
]
