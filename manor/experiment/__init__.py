"""Experiments: deterministic runs of the real engine code that answer one question each."""

from .bounded_wait import ExperimentResult, ExperimentSettings, RequestResult, run_in_process, run_over_http

__all__ = ["ExperimentResult", "ExperimentSettings", "RequestResult", "run_in_process", "run_over_http"]
