"""Tools to take to your own code: they need PyTorch (and graphviz for pictures), nothing of the course.

    from helpers.tools import diagnose, draw_saved_graph, named_parameters

    params = named_parameters(G=generator, D=discriminator)
    diagnose(g_loss, params)                  # will backward() fail, and on which saved tensor?
    draw_saved_graph({"g_loss": g_loss}, {"G": fake}, params)
    draw_module_graph({"g_loss": g_loss}, {"G": generator, "D": discriminator})   # one box per module call
    watch = ReductionWatch(G=ddp_generator, D=ddp_discriminator)   # under DDP: what was never averaged?
"""
from helpers.tools.anomaly import forward_trace
from helpers.tools.ddp_watch import ReductionWatch, Unreduced, replicas_differ
from helpers.tools.diagnosis import Diagnosis, SilentChange, diagnose
from helpers.tools.errors import KINDS, ErrorKind, classify, get_kind, parse_version_error, short_description
from helpers.tools.expect import ErrorReport, expect_error
from helpers.tools.fingerprint import ParameterRecord, record_parameters
from helpers.tools.gradients import close, gradients_of, relative_error, same_gradients
from helpers.tools.graph import draw_graph, draw_module_graph, graph_as_text, named_parameters
from helpers.tools.saved import (
    SavedTensor,
    State,
    count_states,
    graph_nodes,
    saved_bytes,
    saved_tensors,
    saved_tensors_of,
)
from helpers.tools.saved_graph import draw_saved_graph
from helpers.tools.spawn import WorkerFailed, run_distributed
from helpers.tools.versions import VersionTimeline

__all__ = [
    # expected errors: show a deliberate error, and fail when it does not happen
    "expect_error", "ErrorReport", "KINDS", "ErrorKind", "classify", "get_kind", "parse_version_error",
    "short_description",
    # before backward: will it fail, and why
    "diagnose", "Diagnosis", "SilentChange", "record_parameters", "ParameterRecord",
    # the tensors a graph saved for backward: alive, freed or stale
    "saved_tensors", "saved_tensors_of", "graph_nodes", "count_states", "saved_bytes", "SavedTensor", "State",
    # pictures of the graph
    "draw_graph", "draw_module_graph", "draw_saved_graph", "named_parameters", "graph_as_text",
    # version counters over time, and where a failing node came from
    "VersionTimeline", "forward_trace",
    # proving a gradient: compare it with a reference
    "gradients_of", "same_gradients", "relative_error", "close",
    # several processes (DDP): run a function on each, and see what DDP did not average
    "run_distributed", "WorkerFailed", "ReductionWatch", "Unreduced", "replicas_differ",
]
