"""A run: a tick loop assembled from settings and a scene, and a command's life around it.

    engine      settings + scene -> gate, limiter, backend, layers, world, tick loop
    forecast    what a run's settings promise before its first tick
    interrupts  Ctrl-C and SIGTERM: a command stops cleanly, in one line
    startup     the same from a command's first instant, before its run is under way
"""

# A folder of modules, imported one by one: a command's signal handling needs no engine.
__all__: list[str] = []
