"""Convergence curves: training loss (or another column) against the iteration,
one line per run, from `trainsim run --metrics FILE.csv` files.

    python3 -m analysis.plots.convergence METRICS.csv [METRICS.csv ...] --out loss.png
        [--column loss] [--labels a,b] [--log]
A trainsim.run/1 JSON with loss_per_iteration is read as well (iterations 0, 1, ...).
"""
import math
import os

from analysis.plots import common


def run_series(source, column="loss"):
    """(iterations, values) of one run: a metrics CSV path, a load_metrics
    dict, or a trainsim.run/1 JSON (path or dict) with loss_per_iteration.
    Rows whose value is empty (NaN) are dropped."""
    if isinstance(source, dict) and "format" not in source:
        metrics, where = source, "metrics"
    elif isinstance(source, dict) or os.fspath(source).endswith(".json"):
        run = common.load_run(source)
        losses = run.get("loss_per_iteration")
        if column != "loss" or losses is None:
            raise common.FormatError(f"{'run' if isinstance(source, dict) else source}: loss_per_iteration",
                                     "is missing" if losses is None else f"holds loss, not {column}",
                                     "a run with loss_per_iteration, or a --metrics CSV")
        metrics, where = {"iteration": list(range(len(losses))), "loss": losses}, "run"
    else:
        metrics, where = common.load_metrics(source), os.fspath(source)
    if column not in metrics:
        raise common.FormatError(f"{where}: {column}", "is not a column", f"one of {', '.join(metrics)}")
    pairs = [(i, v) for i, v in zip(metrics["iteration"], metrics[column]) if not math.isnan(v)]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def plot_convergence(runs, column="loss", labels=None, log=False, ax=None):
    """One line per run: `runs` is {label: source} or a list of sources
    (labelled by file name); see run_series for the sources."""
    if isinstance(runs, dict) and "format" not in runs and "iteration" not in runs:
        labels, runs = list(runs), list(runs.values())
    elif isinstance(runs, (str, dict)) or hasattr(runs, "__fspath__"):
        runs = [runs]
    labels = labels or [os.path.splitext(os.path.basename(os.fspath(r)))[0] if not isinstance(r, dict)
                        else f"run {i + 1}" for i, r in enumerate(runs)]
    if len(labels) != len(runs):
        raise common.FormatError("labels", f"{len(labels)} given for {len(runs)} runs", "one label per run")
    fig, ax = common.figure_and_axes(ax)
    for source, label in zip(runs, labels):
        iterations, values = run_series(source, column)
        ax.plot(iterations, values, label=label, linewidth=1.2)
    if log:
        ax.set_yscale("log")
    ax.set_xlabel("iteration")
    ax.set_ylabel(column)
    ax.legend(fontsize=8)
    return fig


def main(argv=None):
    p = common.parser(__doc__.splitlines()[0], "--metrics CSV or trainsim.run/1 JSON", many=True)
    p.add_argument("--column", default="loss", help="column to draw (default loss)")
    p.add_argument("--labels", help="comma-separated, one per input (default: file names)")
    p.add_argument("--log", action="store_true", help="logarithmic y axis")
    args = p.parse_args(argv)
    labels = args.labels.split(",") if args.labels else None
    fig = plot_convergence(args.inputs, args.column, labels, args.log)
    fig.axes[0].set_title(args.title or "")
    common.save(fig, args.out)


if __name__ == "__main__":
    common.run_cli(main)
