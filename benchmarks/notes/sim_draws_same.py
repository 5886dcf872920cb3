"""A hash of 13,600 simulator draws (benchmarks/notes/sim_draws.md): two simulators (the
scene's, and one with jitter, line templates, error, hang and invalid rates), every
caller style, with and without a shape; run it on two trees and compare.

    PYTHONPATH=TREE python benchmarks/notes/sim_draws_same.py
"""
import hashlib

from manor.calls import Request
from manor.config import flags_source
from manor.config.layering import built_in_source, layer_defaults_source
from manor.providers.sim import SimProfile, SimProvider
from manor.run.engine import configure, scene_sim
from manor.worlds.werewolf import choice_shape

config, scene = configure([built_in_source(), layer_defaults_source(), flags_source({}, {})])
profiles = {"a": SimProfile(jitter=0.5), "b": SimProfile(), "c": SimProfile(lines=("x {someone}",))}
sims = [scene_sim(config, scene), SimProvider(profiles, seed=7, error_rate=0.1, hang_rate=0.1, invalid_rate=0.3)]
shape = choice_shape("vote", ("alice", "bob", "carol"))
digest, draws = hashlib.sha256(), 0
for sim in sims:
    for caller in ("character", "narrator", "summariser", "scene_beat", "x"):
        for agent in [*sim.profiles, "nobody"]:
            for tick in range(40):
                for attempt in range(2):
                    for shaped in (None, shape):
                        request = Request(caller=caller, agent=agent, tick=tick, attempt=attempt, prompt="Hello there:\nthe butler did it", shape=shaped)
                        digest.update(repr(sim._draw(request)).encode())
                        draws += 1
print(draws, digest.hexdigest())
