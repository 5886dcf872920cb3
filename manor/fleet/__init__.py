"""Many worlds on one platform: every call of every world through one gate.

    in_process  a fleet in one process, on one in-process (or Redis) gate
    processes   a fleet spread over OS processes, sharing the gate through Redis
"""

from .in_process import Fleet, build_fleet, configure_worlds
from .processes import ProcessFleet

__all__ = ["Fleet", "ProcessFleet", "build_fleet", "configure_worlds"]
