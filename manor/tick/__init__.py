"""The tick: plan a world's calls, fire them through a policy, apply their records.

    loop           TickLoop: one tick after another
    policies       how a tick's calls are fired: pipeline, batch, legacy
    instruments    observers of the loop: dashboard, save writer, statistics
    ordering       longest-first ticket order
    prediction     predicted call latency, which that order is planned from
    ordered_start  starting calls one after another in a fixed order
    gc_pause       the cyclic collector's full scans, kept out of a tick's way
    statistics     a run's figures, counted from its records
    driver         run, pause, step: a tick loop driven as a person at a dashboard does
"""

from .instruments import Instrument
from .loop import TickLoop
from .policies import Batch, Legacy, Pipeline, Policy, make_policy

__all__ = ["Batch", "Instrument", "Legacy", "Pipeline", "Policy", "TickLoop", "make_policy"]
