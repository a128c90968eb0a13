"""Strategy speedup bars: speedup_vs_single (or samples_per_s) per strategy of a
prediction, with a paper's values beside them as a second series when given.

    python3 -m analysis.plots.speedup PREDICTION.json --out speedup.png
        [--metric speedup_vs_single|samples_per_s] [--method analytic|simulated]
        [--paper PAPER.json --paper-label "seed 000"]
PAPER.json maps strategy ids (or any labels of the prediction) to numbers.
"""
import numpy as np

from analysis.plots import common

METRIC_LABELS = {"speedup_vs_single": "speedup over one device", "samples_per_s": "samples / s"}


def speedup_values(prediction, metric="speedup_vs_single", method="analytic"):
    """{strategy: metric} of one method of a prediction (path or dict)."""
    prediction = common.load_prediction(prediction)
    values = {}
    for strategy, r in common.prediction_results(prediction, method).items():
        values[strategy] = common.number(r, metric, f"prediction: {strategy} ({method})")
    if not values:
        raise common.FormatError("prediction: results", f"has no {method} result", "trainsim predict --method "
                                 f"{method} or both")
    return values


def plot_speedup(data, paper=None, metric="speedup_vs_single", method="analytic", label="trainsim",
                 paper_label="paper", ax=None):
    """Bars of `data` ({label: value}, or a prediction path/dict from which
    `metric` of `method` is taken), and of `paper` ({label: value} or its JSON
    path) beside them. Labels only the paper gives get a paper bar alone."""
    if not (isinstance(data, dict) and "format" not in data):
        data = speedup_values(data, metric, method)
    if paper is not None and not isinstance(paper, dict):
        paper = common.load_mapping(paper, "paper values")
    labels = list(data) + [k for k in (paper or {}) if k not in data]
    fig, ax = common.figure_and_axes(ax, size=(max(5.0, 0.8 * len(labels) + 2), 4))
    x = np.arange(len(labels))
    width = 0.4 if paper else 0.7
    ours = [(i, data[k]) for i, k in enumerate(labels) if k in data]
    bars = ax.bar(x[[i for i, _ in ours]] - (width / 2 if paper else 0), [v for _, v in ours], width, label=label)
    ax.bar_label(bars, fmt="%.3g", fontsize=7)
    if paper:
        theirs = [(i, paper[k]) for i, k in enumerate(labels) if k in paper]
        bars = ax.bar(x[[i for i, _ in theirs]] + width / 2, [v for _, v in theirs], width, label=paper_label,
                      hatch="//", alpha=0.8)
        ax.bar_label(bars, fmt="%.3g", fontsize=7)
        ax.legend()
    ax.set_xticks(x, labels, rotation=30, ha="right")
    ax.set_ylabel(METRIC_LABELS.get(metric, metric))
    return fig


def plot_grouped_bars(groups, ylabel="speedup over one device", log=False, reference=None, ax=None):
    """Bars grouped per key of `groups` ({group: {series: value}}, e.g. model ->
    strategy -> speedup): one colour per series, series in order of first
    appearance, a series missing from a group leaves its slot empty. `log`
    draws a log y axis; `reference` draws a dotted horizontal line there (1.0:
    as fast as one device)."""
    names = list(groups)
    series = list(dict.fromkeys(s for values in groups.values() for s in values))
    if not names or not series:
        raise common.FormatError("groups", "is empty", "{group: {series: value}} with at least one value")
    fig, ax = common.figure_and_axes(ax, size=(max(5.0, 0.35 * len(names) * len(series) + 2), 4))
    x = np.arange(len(names))
    width = 0.8 / len(series)
    for i, name in enumerate(series):
        slots = [(j, groups[g][name]) for j, g in enumerate(names) if name in groups[g]]
        for j, value in slots:
            common.finite(value, f"groups: {names[j]}: {name}", minimum=0 if not log else None)
        ax.bar(x[[j for j, _ in slots]] + (i - (len(series) - 1) / 2) * width, [v for _, v in slots], width,
               label=name)
    if reference is not None:
        ax.axhline(reference, color="black", linestyle=":", linewidth=0.8)
    if log:
        ax.set_yscale("log")
    ax.set_xticks(x, names, rotation=30, ha="right")
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=8)
    return fig


def main(argv=None):
    p = common.parser(__doc__.splitlines()[0], "trainsim.prediction/1 JSON")
    p.add_argument("--metric", default="speedup_vs_single", choices=sorted(METRIC_LABELS))
    p.add_argument("--method", default="analytic", choices=common.METHODS)
    p.add_argument("--paper", help="JSON {label: value} drawn beside")
    p.add_argument("--paper-label", default="paper")
    args = p.parse_args(argv)
    prediction = common.load_prediction(args.inputs)
    fig = plot_speedup(prediction, args.paper, args.metric, args.method, paper_label=args.paper_label)
    fig.axes[0].set_title(args.title or common.setting(prediction))
    common.save(fig, args.out)


if __name__ == "__main__":
    common.run_cli(main)
