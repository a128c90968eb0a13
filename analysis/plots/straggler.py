"""The straggler curve (seed 001, Table 2): how much slower an iteration gets
when compute ops are slowed by x% at random, per strategy.

    python3 -m analysis.plots.straggler SIMULATION.json ... --out s.png [--paper PAPER.json]
Inputs are `trainsim simulate --json` outputs: per strategy, one run without
stragglers and runs with `--straggler P:SLOWDOWN` (several seeds are averaged).
Relative slowdown = mean iteration_s with stragglers / iteration_s without - 1,
as analysis/scripts/straggler_study.py computes it. PAPER.json maps a label to
{"x percent": relative slowdown percent}, drawn dashed.
"""
import json
import statistics

from analysis.plots import common


def _curve_key(sim):
    """Runs of one curve share model, cluster, strategy and configuration."""
    return (sim.get("model"), sim.get("cluster"), sim["strategy"], json.dumps(sim.get("config", {}), sort_keys=True))


def straggler_curves(simulations):
    """{label: [(x percent, relative slowdown percent)]}, sorted by x and
    starting at (0, 0), from simulations (paths or dicts). A strategy whose
    runs span several straggler probabilities gets one curve per probability."""
    sims = [common.load_simulation(s) for s in simulations]
    clean, slowed = {}, {}  # key -> [iteration_s]; (key, probability) -> {x: [iteration_s]}
    for s in sims:
        probability, slowdown = s["straggler"]["probability"], s["straggler"]["slowdown"]
        if probability == 0 or slowdown == 1:
            clean.setdefault(_curve_key(s), []).append(s["iteration_s"])
        else:
            x = round(100 * (slowdown - 1), 6)
            slowed.setdefault((_curve_key(s), probability), {}).setdefault(x, []).append(s["iteration_s"])
    labels = _labels([key for key, _ in slowed])
    curves = {}
    for (key, probability), by_x in slowed.items():
        if key not in clean:
            raise common.FormatError(f"simulations of {key[2]} on {key[0]}", "have no run without stragglers",
                                     "one trainsim simulate run without --straggler per strategy")
        clean_s = statistics.fmean(clean[key])
        points = [(0.0, 0.0)] + [(x, 100 * (statistics.fmean(v) / clean_s - 1)) for x, v in sorted(by_x.items())]
        label = labels[key] + (f" (p = {probability:g})" if len({p for k, p in slowed if k == key}) > 1 else "")
        curves[label] = points
    return curves


def _labels(keys):
    """Strategy names, with the model and the configuration where they tell curves apart."""
    keys = list(dict.fromkeys(keys))
    labels = {}
    for key in keys:
        model, _, strategy, config = key
        same = [k for k in keys if k[2] == strategy]
        label = strategy
        if len({k[0] for k in keys}) > 1:
            label = f"{model} {label}"
        if len(same) > 1:
            differing = {name: value for name, value in json.loads(config).items()
                         if len({json.dumps(json.loads(k[3]).get(name)) for k in same}) > 1}
            label += " " + ", ".join(f"{n}={json.dumps(v, separators=(',', ':'))}" for n, v in differing.items())
        labels[key] = label
    return labels


def load_paper_curves(source):
    """{label: [(x, y)]} from {label: {"x": y}} (path or dict)."""
    data, where = common.read_json(source)
    if not isinstance(data, dict) or not data:
        raise common.FormatError(where, "is not a non-empty object", '{label: {"x percent": slowdown percent}}')
    curves = {}
    for label, values in data.items():
        if not isinstance(values, dict):
            raise common.FormatError(f"{where}: {label}", "is not an object", '{"x percent": slowdown percent}')
        points = []
        for x in values:
            try:
                x_percent = float(x)
            except ValueError:
                raise common.FormatError(f"{where}: {label}: {x}", "is not a number", "x in percent") from None
            points.append((x_percent, common.number(values, x, f"{where}: {label}")))
        curves[label] = sorted(points)
    return curves


def plot_straggler(data, paper=None, ax=None):
    """Lines of relative slowdown (%) against the straggler slowdown x (%):
    `data` is {label: [(x, y)]} or simulations (straggler_curves); `paper`
    ({label: [(x, y)]} or its JSON) is drawn dashed."""
    curves = data if isinstance(data, dict) else straggler_curves(data)
    if paper is not None and not isinstance(paper, dict):
        paper = load_paper_curves(paper)
    fig, ax = common.figure_and_axes(ax)
    for label, points in curves.items():
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=label)
    for label, points in (paper or {}).items():
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="x", linestyle="--", label=label)
    ax.set_xlabel("straggler slowdown x (%)")
    ax.set_ylabel("iteration slowdown (%)")
    ax.legend(fontsize=8)
    return fig


def main(argv=None):
    p = common.parser(__doc__.splitlines()[0], "trainsim.simulation/1 JSON", many=True)
    p.add_argument("--paper", help='JSON {label: {"x": y}} drawn dashed')
    args = p.parse_args(argv)
    fig = plot_straggler(args.inputs, args.paper)
    fig.axes[0].set_title(args.title or "")
    common.save(fig, args.out)


if __name__ == "__main__":
    common.run_cli(main)
