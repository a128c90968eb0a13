"""Figures of trainsim's outputs with matplotlib: one module per figure, each a
`plot_*(data, ..., ax=None) -> Figure` function for notebooks and a command
line, `python3 -m analysis.plots.<module> INPUT... --out FILE.png`.

    from analysis.plots import plot_timeline, load_trace
    plot_timeline(load_trace("t.json")).savefig("t.png")
"""
import importlib

# name -> module; imported on first use so `python3 -m analysis.plots.x` does
# not import x twice.
_EXPORTS = {
    "plot_speedup": "speedup", "plot_timeline": "timeline", "plot_predicted_vs_measured": "scatter",
    "plot_breakdown": "breakdown", "plot_chunk_curve": "chunk", "plot_straggler": "straggler",
    "straggler_curves": "straggler", "plot_convergence": "convergence",
    "summarize_errors": "errors", "error_table": "errors",
    "load_prediction": "common", "load_simulation": "common", "load_chunking": "common", "load_run": "common",
    "load_validation": "common", "load_metrics": "common", "load_trace": "common", "FormatError": "common",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
