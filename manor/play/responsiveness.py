"""How responsive the dashboard stays under load: ``python -m manor.play.responsiveness``.

Runs the dashboard headless (Textual's test driver: every frame is composed, nothing is
printed) on a world of ``--agents`` characters, presses the gate keys while it ticks,
and reports:

- key → screen: from a key press until the status line shows its effect (the key
  handled, the change made inside the trio run, the panels redrawn);
- frames drawn per second, and how late the asyncio loop ran a 5 ms timer (a frame or
  an engine step that hogs the loop shows up here).

Speed is the dashboard's own default (a tick takes about a second) unless ``--max``
runs simulated time flat out, the engine then using every moment the UI leaves it.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import math
import time
from collections.abc import Sequence

from textual.screen import Screen

from ..config import flags_source, standard_sources
from ..run.engine import configure
from .app import build_app
from ..paced_clock import PacedClock
from .widgets import StatusLine

__all__ = ["main", "measure"]


def _quantiles(values: Sequence[float]) -> str:
    ordered = sorted(values)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000

    return f"p50 {at(0.5):.0f} ms, p95 {at(0.95):.0f} ms, max {ordered[-1] * 1000:.0f} ms"


async def measure(agents: int, presses: int, flat_out: bool) -> dict[str, str | float]:
    """Run the dashboard on ``agents`` characters and measure it (see the module)."""
    config, scene = configure(standard_sources(flags=flags_source({"run.agents": agents}, {}), environ={}))
    clock = PacedClock(math.inf) if flat_out else "auto"
    app = build_app(config, scene, clock=clock)
    frames = 0
    compose = Screen._compositor_refresh

    def counted(screen: Screen) -> None:
        nonlocal frames
        frames += 1
        compose(screen)

    Screen._compositor_refresh = counted  # type: ignore[method-assign]
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            while app.state.tick < 1:  # the first tick is under way and calibrated
                await asyncio.sleep(0.05)
            answers: list[float] = []
            for press in range(presses):
                key, size = ("plus", app.engine.loop.gate.size + 1) if press % 2 == 0 else ("minus", app.engine.loop.gate.size - 1)
                status = app.query_one(StatusLine)
                started = time.perf_counter()
                # What the terminal driver does with a key (Pilot.press would also wait
                # for every widget to go idle, which a live dashboard never does).
                app.simulate_key(key)
                while f"gate {size}/" not in str(getattr(status.content, "plain", "")):
                    await asyncio.sleep(0.001)
                answers.append(time.perf_counter() - started)
                await asyncio.sleep(0.2)
            lags: list[float] = []
            frames, window = 0, time.perf_counter()
            while time.perf_counter() - window < 5:
                before = time.perf_counter()
                await asyncio.sleep(0.005)
                lags.append(time.perf_counter() - before - 0.005)
            fps = frames / (time.perf_counter() - window)
            ticks = app.state.tick
            speed = app.clock.speed if app.clock is not None else 1.0
            await pilot.press("q")
    finally:
        Screen._compositor_refresh = compose  # type: ignore[method-assign]
    return {
        "agents": agents,
        "speed": "max" if math.isinf(speed) else f"x{speed:g}",
        "ticks": ticks,
        "key_to_screen": _quantiles(answers),
        "frames_per_second": round(fps, 1),
        "loop_lateness": _quantiles(lags),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m manor.play.responsiveness", description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--presses", type=int, default=20)
    parser.add_argument("--max", action="store_true", help="run simulated time flat out")
    args = parser.parse_args(argv)
    gc.collect()
    gc.freeze()  # as 'manor play' does before it starts the dashboard
    result = asyncio.run(measure(args.agents, args.presses, args.max))
    for key, value in result.items():
        print(f"{key:>18}: {value}")


if __name__ == "__main__":
    main()
