"""Predicted against measured iteration times, one point per strategy and
prediction method, with the y = x line and the ±5% band around it.

    python3 -m analysis.plots.scatter VALIDATION.json [VALIDATION.json ...] --out s.png [--band 0.05]
Axes are logarithmic when the times span more than a factor of 20.
"""
import numpy as np

from analysis.plots import common

MARKERS = {"analytic": "o", "simulated": "s"}


def plot_predicted_vs_measured(validations, band=0.05, ax=None):
    """Scatter of (measured_s, predicted_<method>_s) over one or more
    validations (paths or dicts); `band` is the relative half-width shaded."""
    if isinstance(validations, (str, dict)) or hasattr(validations, "__fspath__"):
        validations = [validations]
    points = {m: [] for m in common.METHODS}  # method -> [(measured_s, predicted_s, strategy)]
    for source in validations:
        for r in common.load_validation(source)["results"]:
            for method in common.METHODS:
                if r.get(f"predicted_{method}_s") is not None:
                    points[method].append((r["measured_s"], r[f"predicted_{method}_s"], r["strategy"]))
    if not any(points.values()):
        raise common.FormatError("validation: results", "is empty", "at least one strategy with times")
    fig, ax = common.figure_and_axes(ax, size=(5.5, 5))
    times = [t for ps in points.values() for p in ps for t in p[:2]]
    low, high = min(times) / (1 + 2 * band), max(times) * (1 + 2 * band)
    if high / low > 20:
        ax.set_xscale("log")
        ax.set_yscale("log")
    x = np.geomspace(low, high, 50)
    # the band: predictions whose relative error (common.relative_error) is within ±band
    ax.fill_between(x, x * (1 - band), x * (1 + band), color="tab:green", alpha=0.15,
                    label=f"±{100 * band:g}%")
    ax.plot(x, x, color="gray", linewidth=0.8)
    for method, ps in points.items():
        if not ps:
            continue
        ax.scatter([p[0] for p in ps], [p[1] for p in ps], marker=MARKERS[method], label=method, zorder=3)
        for measured_s, predicted_s, strategy in ps:
            ax.annotate(strategy, (measured_s, predicted_s), fontsize=6, xytext=(3, 3), textcoords="offset points")
    ax.set_xlim(low, high)
    ax.set_ylim(low, high)
    ax.set_xlabel("measured iteration (s)")
    ax.set_ylabel("predicted iteration (s)")
    ax.legend(fontsize=8)
    return fig


def main(argv=None):
    p = common.parser(__doc__.splitlines()[0], "trainsim.validation/1 JSON", many=True)
    p.add_argument("--band", type=float, default=0.05, help="relative half-width of the band (0.05 = ±5%%)")
    args = p.parse_args(argv)
    if not 0 < args.band < 1:
        raise common.FormatError("--band", f"is {args.band}", "a fraction between 0 and 1, e.g. 0.05")
    fig = plot_predicted_vs_measured(args.inputs, args.band)
    fig.axes[0].set_title(args.title or "")
    common.save(fig, args.out)


if __name__ == "__main__":
    common.run_cli(main)
