"""The parser of ``manor serve-agent``: its description and flags (what it does: ``manor.cli.serve_agent_cmd``)."""

from __future__ import annotations

import argparse

from ..numbers import non_negative_float, positive_float, positive_int

__all__ = ["register"]

_EPILOG = """\
endpoints:
  POST /agents/{agent_id}/runs             Agno AgentOS style; form fields message, stream,
                                           session_id, run_id (JSON bodies get 422)
  POST /agents/{agent_id}/runs/{id}/cancel cancel a queued or running run
  POST /v1/chat/completions                OpenAI-compatible, streaming or not
  POST /v1/messages                        Anthropic Messages, streaming or not
  POST /admin/capacity                     {"capacity": N}: run at most N at once from now on
  GET  /stats                              capacity, running, queued, peak, dropped, ...

directives, anywhere in a message (removed before it is answered):
  @latency=1.3   @hang   @status=429   @status=529   @retry-after=2   @spend-cap   @garbage   @model-error

example:
  manor serve-agent --capacity 3 &
  curl -s -F message='hello @latency=0.5' -F stream=false http://127.0.0.1:PORT/agents/agent/runs
"""


def register(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Serve a simulated remote agent over HTTP until interrupted (Ctrl-C). It runs at most "
        "--capacity calls at once and queues the rest FIFO; a queued run whose client hangs up is dropped. "
        "Prints its URL on the first line."
    )
    parser.epilog = _EPILOG
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s)")
    parser.add_argument("--port", type=int, default=0, help="port to listen on (default: a free one)")
    parser.add_argument("--capacity", type=positive_int, default=3, help="runs in progress at once (default: %(default)s)")
    parser.add_argument(
        "--reject-when-full",
        action="store_true",
        help="answer 429 (Retry-After: 1, rate headers saying 0 remain) when every slot is busy, instead of queueing",
    )
    parser.add_argument(
        "--latency", type=non_negative_float, default=1.0, help="seconds a run takes without @latency (default: %(default)s)"
    )
    parser.add_argument(
        "--time-scale", type=positive_float, default=1.0, help="multiply every latency by this (default: %(default)s)"
    )
    parser.add_argument(
        "--agent",
        dest="agents",
        action="append",
        metavar="ID",
        help="an agent id to serve (repeatable; default: 'agent'); OpenAI model names are all served",
    )
    parser.set_defaults(handler="run")
