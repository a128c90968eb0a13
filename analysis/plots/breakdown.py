"""Breakdown stacks: each strategy's iteration split into compute, exposed
communication, idle waiting on transfers and idle from imbalance.

    python3 -m analysis.plots.breakdown PREDICTION.json --out b.png [--method analytic] [--shares]
    python3 -m analysis.plots.breakdown SIMULATION.json [SIMULATION.json ...] --out b.png
A prediction's breakdown_s sums to its iteration_s; a simulation's workers'
mean breakdown is scaled to its iteration_s (same shares, per iteration).
"""
import numpy as np

from analysis.plots import common

PART_LABELS = {"compute": "compute", "exposed_comm": "exposed communication",
               "idle_transfer": "idle on transfers", "idle_imbalance": "idle from imbalance"}
PART_COLOURS = {"compute": "tab:blue", "exposed_comm": "tab:red", "idle_transfer": "tab:orange",
                "idle_imbalance": "tab:gray"}


def simulation_breakdown(simulation):
    """{part: s per iteration}: the workers' mean breakdown over the simulated
    window, scaled so that the parts sum to iteration_s."""
    workers = simulation["workers"]
    mean = {p: sum(w["breakdown_s"][p] for w in workers) / len(workers) for p in common.BREAKDOWN_PARTS}
    total_s = sum(mean.values())
    scale = simulation["iteration_s"] / total_s if total_s > 0 else 0.0
    return {p: v * scale for p, v in mean.items()}


def breakdown_values(data, method="analytic"):
    """{label: {part: s}} from a prediction (path or dict, one method), a list
    of simulations (paths or dicts), or such a mapping already."""
    if isinstance(data, dict) and "format" not in data:
        return data
    if isinstance(data, (list, tuple)):
        sims = [common.load_simulation(s) for s in data]
        return dict(zip(common.run_labels(sims), map(simulation_breakdown, sims)))
    prediction = common.load_prediction(data)
    values = {s: r["breakdown_s"] for s, r in common.prediction_results(prediction, method).items()}
    if not values:
        raise common.FormatError("prediction: results", f"has no {method} result", f"--method {method} or both")
    return values


def plot_breakdown(data, method="analytic", shares=False, ax=None):
    """Stacked bars, one per strategy, parts in BREAKDOWN_PARTS order; in ms
    per iteration, or in percent of each bar's total with `shares`."""
    values = breakdown_values(data, method)
    labels = list(values)
    fig, ax = common.figure_and_axes(ax, size=(max(5.0, 0.7 * len(labels) + 3), 4))
    x = np.arange(len(labels))
    totals = np.array([sum(values[k][p] for p in common.BREAKDOWN_PARTS) for k in labels])
    scale = 100 / np.where(totals > 0, totals, 1.0) if shares else 1e3  # all-zero bars stay zero
    bottom = np.zeros(len(labels))
    for part in common.BREAKDOWN_PARTS:
        heights = np.array([values[k][part] for k in labels]) * scale
        ax.bar(x, heights, 0.7, bottom=bottom, label=PART_LABELS[part], color=PART_COLOURS[part])
        bottom += heights
    ax.set_xticks(x, labels, rotation=30, ha="right")
    ax.set_ylabel("share of the iteration (%)" if shares else "time per iteration (ms)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


def main(argv=None):
    p = common.parser(__doc__.splitlines()[0], "one trainsim.prediction/1 JSON, or trainsim.simulation/1 JSONs",
                      many=True)
    p.add_argument("--method", default="analytic", choices=common.METHODS, help="of a prediction")
    p.add_argument("--shares", action="store_true", help="percent of each iteration instead of ms")
    args = p.parse_args(argv)
    first, _ = common.read_json(args.inputs[0])
    if first.get("format") == "trainsim.prediction/1":
        if len(args.inputs) > 1:
            raise common.FormatError("INPUT", f"{len(args.inputs)} files with a prediction",
                                     "one prediction, or any number of simulations")
        data = first
    else:
        data = args.inputs
    fig = plot_breakdown(data, args.method, args.shares)
    fig.axes[0].set_title(args.title or common.setting(first))
    common.save(fig, args.out)


if __name__ == "__main__":
    common.run_cli(main)
