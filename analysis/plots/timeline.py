"""Timeline of a trace: one row per worker and stream (lane), ops as bars
coloured by kind; a second trace, when given, is drawn below as "measured".

    python3 -m analysis.plots.timeline TRACE.json [MEASURED_TRACE.json] --out t.png
        [--iterations FIRST-LAST]
Each trace's time axis starts at its first drawn op (the two clocks differ).
"""
import matplotlib.patches as mpatches

from analysis.plots import common

# Op kinds of the simulator and executor (sim/plan/plan.cpp op_kind_name):
# compute in blues/greens, transfers in reds, host work in browns.
KIND_COLOURS = {
    "forward": "tab:blue", "backward": "tab:orange", "recompute": "tab:cyan", "update": "tab:green",
    "compress": "tab:olive", "decompress": "khaki", "send": "tab:red", "recv": "tab:pink",
    "allreduce": "tab:purple", "broadcast": "plum", "copy_to_host": "tab:brown",
    "copy_to_device": "sandybrown", "host_accumulate": "tab:gray", "server_step": "tab:olive", "barrier": "black",
}
_SPARE_COLOURS = ("gold", "teal", "navy", "maroon", "lime", "salmon")
LANE_HEIGHT = 0.8


def kind_colour(kind, colours):
    """Colour of `kind` in `colours` (a copy of KIND_COLOURS); unknown kinds
    are added with the spare colours in turn."""
    if kind not in colours:
        colours[kind] = _SPARE_COLOURS[(len(colours) - len(KIND_COLOURS)) % len(_SPARE_COLOURS)]
    return colours[kind]


def shown_events(trace, iterations):
    """Events of the iterations FIRST..LAST (inclusive; None = all); events
    without an iteration are kept."""
    if iterations is None:
        return trace.events
    first, last = iterations
    return [e for e in trace.events if not isinstance(e.args.get("iteration"), int)
            or first <= e.args["iteration"] <= last]


def draw_trace(ax, trace, iterations, first_row, prefix, colours):
    """Draws one trace's lanes from row `first_row` down; returns (labels, kinds drawn)."""
    events = shown_events(trace, iterations)
    if not events:
        raise common.FormatError("iterations", f"{iterations[0]}-{iterations[1]} selects no op of the trace",
                                 "iterations the trace holds")
    origin_s = min(e.start_s for e in events)
    lanes = trace.lanes()
    row_of = {lane: first_row + i for i, lane in enumerate(lanes)}
    bars = {}  # (row, kind) -> [(start_ms, duration_ms)]
    for e in events:
        bars.setdefault((row_of[(e.worker, e.stream)], e.op), []).append(
            ((e.start_s - origin_s) * 1e3, e.duration_s * 1e3))
    for (row, kind), spans in sorted(bars.items()):
        ax.broken_barh(spans, (row - LANE_HEIGHT / 2, LANE_HEIGHT), facecolors=kind_colour(kind, colours))
    return [prefix + trace.lane_label(lane) for lane in lanes], {kind for _, kind in bars}


def plot_timeline(trace, measured=None, iterations=None, ax=None):
    """Lanes of `trace` (a Trace, path or parsed JSON) and, below them, of
    `measured`; `iterations` = (first, last) limits the ops drawn."""
    traces = [common.load_trace(trace) if not isinstance(trace, common.Trace) else trace]
    if measured is not None:
        traces.append(common.load_trace(measured) if not isinstance(measured, common.Trace) else measured)
    rows = sum(len(t.lanes()) for t in traces)
    fig, ax = common.figure_and_axes(ax, size=(10, 1.2 + 0.28 * rows))
    labels, kinds, colours = [], set(), dict(KIND_COLOURS)
    for i, t in enumerate(traces):
        prefix = ("predicted ", "measured ")[i] if measured is not None else ""
        if i > 0:
            ax.axhline(len(labels) - 0.5, color="gray", linewidth=0.8)
        lane_labels, drawn = draw_trace(ax, t, iterations, len(labels), prefix, colours)
        labels += lane_labels
        kinds |= drawn
    ax.set_yticks(range(len(labels)), labels, fontsize=7)
    ax.set_ylim(len(labels) - 0.5, -0.5)  # first worker on top
    ax.set_xlabel("time (ms)")
    ax.legend(handles=[mpatches.Patch(color=colours[k], label=k) for k in colours if k in kinds],
              loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7)
    return fig


def parse_iterations(value):
    """'3' or '2-5' -> (first, last)."""
    first, _, last = value.partition("-")
    try:
        result = (int(first), int(last or first))
    except ValueError:
        raise common.FormatError("--iterations", f"is {value!r}", "FIRST-LAST or one iteration, e.g. 0-1") from None
    if result[0] < 0 or result[1] < result[0]:
        raise common.FormatError("--iterations", f"is {value!r}", "0 <= FIRST <= LAST")
    return result


def main(argv=None):
    p = common.parser(__doc__.splitlines()[0], "Chrome trace JSON: the predicted one, then optionally the measured",
                      many=True)
    p.add_argument("--iterations", help="FIRST-LAST: draw only these iterations")
    args = p.parse_args(argv)
    if len(args.inputs) > 2:
        raise common.FormatError("INPUT", f"{len(args.inputs)} traces given", "one trace, or predicted and measured")
    iterations = parse_iterations(args.iterations) if args.iterations else None
    fig = plot_timeline(args.inputs[0], args.inputs[1] if len(args.inputs) > 1 else None, iterations)
    fig.axes[0].set_title(args.title or "")
    common.save(fig, args.out)


if __name__ == "__main__":
    common.run_cli(main)
