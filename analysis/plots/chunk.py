"""The chunk-size curve of CGDP (seed 003, figure 2): backward time against the
gradient chunk size, with the chosen chunk size marked.

    python3 -m analysis.plots.chunk CHUNKING.json [CHUNKING.json ...] --out c.png [--chosen N]
CHUNKING.json comes from `trainsim chunk --method uniform` (its `curve` of
backward_s) or `--method heuristic` (its `trials` of Algorithm 1's lapse_s).
The marked point is the file's own chunk_size unless --chosen names another.
"""
from analysis.plots import common


def chunk_curve(chunking):
    """(sizes, seconds, what): the sweep of a chunking, sorted by chunk size."""
    if "curve" in chunking:
        key, time_key, what = "curve", "backward_s", "backward"
    elif "trials" in chunking:
        key, time_key, what = "trials", "lapse_s", "lapse (Algorithm 1)"
    else:
        raise common.FormatError(f"chunking ({chunking.get('method', '?')})", "has no curve or trials",
                                 "the output of trainsim chunk --method uniform or heuristic")
    points = sorted((p["chunk_size"], p[time_key]) for p in chunking[key])
    return [p[0] for p in points], [p[1] for p in points], what


def plot_chunk_curve(chunkings, chosen=None, labels=None, show_compute=True, ax=None):
    """One curve per chunking (path or dict), in ms; a marker at each one's
    chosen chunk size (`chosen`, or the file's chunk_size), and a dashed line at
    the backward compute alone (compute_backward_s) with `show_compute`."""
    if isinstance(chunkings, (str, dict)) or hasattr(chunkings, "__fspath__"):
        chunkings = [chunkings]
    chunkings = [common.load_chunking(c) for c in chunkings]
    labels = labels or [f"{c.get('model', '?')}, batch {c.get('batch', '?')} ({c.get('method', '?')})"
                        for c in chunkings]
    fig, ax = common.figure_and_axes(ax)
    whats = set()
    for chunking, label in zip(chunkings, labels):
        sizes, times_s, what = chunk_curve(chunking)
        whats.add(what)
        (line,) = ax.plot(sizes, [t * 1e3 for t in times_s], label=label, linewidth=1.2)
        size = chosen if chosen is not None else chunking.get("chunk_size")
        if size is not None:
            if size not in sizes:
                raise common.FormatError("chosen", f"chunk size {size} is not on the curve of {label}",
                                         f"a size between {sizes[0]} and {sizes[-1]} that was swept")
            y_ms = times_s[sizes.index(size)] * 1e3
            ax.plot([size], [y_ms], marker="*", markersize=12, color=line.get_color(), linestyle="none")
            ax.annotate(f"chunk size {size}", (size, y_ms), xytext=(5, 8), textcoords="offset points", fontsize=8)
        if show_compute and "compute_backward_s" in chunking:
            ax.axhline(chunking["compute_backward_s"] * 1e3, color=line.get_color(), linestyle="--",
                       linewidth=0.8, label=f"compute alone, {label}")
    ax.set_xlabel("chunk size (layers per gradient chunk)")
    ax.set_ylabel(" / ".join(sorted(whats)) + " (ms)")
    ax.legend(fontsize=7)
    return fig


def main(argv=None):
    p = common.parser(__doc__.splitlines()[0], "trainsim.chunking/1 JSON", many=True)
    p.add_argument("--chosen", type=int, help="chunk size to mark (default: each file's chunk_size)")
    p.add_argument("--no-compute", action="store_true", help="leave out the compute-alone line")
    args = p.parse_args(argv)
    fig = plot_chunk_curve(args.inputs, args.chosen, show_compute=not args.no_compute)
    fig.axes[0].set_title(args.title or "")
    common.save(fig, args.out)


if __name__ == "__main__":
    common.run_cli(main)
