"""Writes the HTML page of `trainsim report` from the JSON files it left in a folder.

`trainsim report --out DIR` writes DIR/prediction.json, DIR/choice.json and
DIR/trace-<strategy>.json, then runs this to write DIR/index.html (for a
transformer, the files report_llm.py reads and its page). The page is
self-contained: figures are inline PNG data URIs, the CSS is inline, nothing is
fetched.

    python3 -m analysis.report DIR
Bad input exits with status 2 and one line `error: <where>: <what> (<expected>)`.
"""
import argparse
import base64
import datetime
import glob
import html
import io
import os
import sys

from analysis import report_llm
from analysis.plots import breakdown, common, speedup, timeline

STYLE = """
body { font-family: sans-serif; max-width: 1100px; margin: 1.5em auto; padding: 0 1em; color: #222; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; }
h2 { font-size: 1.2em; margin-top: 1.6em; border-bottom: 1px solid #ccc; }
p.meta { color: #555; margin-top: 0; }
table { border-collapse: collapse; font-size: 0.9em; margin: 0.6em 0; }
th, td { padding: 0.25em 0.6em; border-bottom: 1px solid #e4e4e4; text-align: left; }
th { background: #f2f2f2; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.excluded td { color: #999; }
p.why { background: #eef5ff; border-left: 4px solid #3b7dd8; padding: 0.5em 0.8em; }
figure { margin: 1em 0; }
figure img { max-width: 100%; border: 1px solid #ddd; }
figcaption { color: #555; font-size: 0.9em; }
"""

# Counts the figures the browser decoded, once the page has loaded, into
# <body data-images-loaded>; a headless browser's DOM dump shows it.
LOADED_SCRIPT = """
window.addEventListener("load", function () {
  var loaded = 0;
  for (var i = 0; i < document.images.length; i++) {
    var img = document.images[i];
    if (img.complete && img.naturalWidth > 0) loaded++;
  }
  document.body.setAttribute("data-images-loaded", String(loaded));
});
"""

# Iterations of the winner's trace the timeline draws (two, mid-run, so the
# pipeline has filled).
TIMELINE_ITERATIONS = 2


# ---------------------------------------------------------------- inputs

def load_choice(source):
    """trainsim.choice/1 (trainsim choose --json): model, cluster, batch_size,
    why, tie_rule and `ranked`, each with strategy, rank and tied (the order
    and ranks are trainsim's, sim/search/rank.hpp), feasible, reason, settings
    and a prediction (iteration_s, samples_per_iteration, samples_per_s,
    speedup_vs_single, memory_bytes_per_device)."""
    data, where = common.read_json(source)
    common.check_format(data, where, "choice")
    for key in ("model", "cluster"):
        common.text(data, key, where)
    common.number(data, "batch_size", where, minimum=1)
    for i, entry in enumerate(common.records(data, "ranked", where)):
        at = f"{where}: ranked[{i}]"
        common.text(entry, "strategy", at)
        if not isinstance(entry.get("feasible"), bool):
            raise common.FormatError(f"{at}: feasible", f"is {entry.get('feasible')!r}", "true or false")
        if "rank" in entry:
            common.number(entry, "rank", at, minimum=0)
        if not isinstance(entry.get("tied", False), bool):
            raise common.FormatError(f"{at}: tied", f"is {entry.get('tied')!r}", "true or false")
        if not isinstance(entry.get("settings", {}), dict):
            raise common.FormatError(f"{at}: settings", "is not an object", "{key: value}")
        prediction = entry.get("prediction")
        if not isinstance(prediction, dict):
            raise common.FormatError(f"{at}: prediction", "is missing", "the strategy's prediction")
        for key in ("iteration_s", "samples_per_s", "speedup_vs_single"):
            common.number(prediction, key, f"{at}: prediction", minimum=0)
    return data


def inputs_date(paths):
    """When the newest input was written, as 'YYYY-MM-DD HH:MM UTC'."""
    newest_s = max(os.path.getmtime(p) for p in paths)
    return datetime.datetime.fromtimestamp(newest_s, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def read_inputs(out_dir):
    """(prediction, choice, {strategy: trace path}, date) of a report folder."""
    paths = {name: os.path.join(out_dir, f"{name}.json") for name in ("prediction", "choice")}
    for name, path in paths.items():
        if not os.path.isfile(path):
            raise common.FormatError(path, "does not exist", f"the {name}.json trainsim report writes")
    traces = {os.path.basename(p)[len("trace-"):-len(".json")]: p
              for p in sorted(glob.glob(os.path.join(out_dir, "trace-*.json")))}
    date = inputs_date(list(paths.values()) + list(traces.values()))
    if is_transformer_report(paths["choice"]):
        return report_llm.load_prediction(paths["prediction"]), report_llm.load_choice(paths["choice"]), traces, date
    return common.load_prediction(paths["prediction"]), load_choice(paths["choice"]), traces, date


def is_transformer_report(choice_path):
    """Whether choice.json is a transformer's 3-D search (trainsim.llm-choice/1)."""
    data, _ = common.read_json(choice_path)
    return isinstance(data, dict) and data.get("format") == "trainsim.llm-choice/1"


# ---------------------------------------------------------------- numbers as text

def format_seconds(seconds):
    """'113.8 us', '2.41 ms', '1.2 s': four significant digits, as trainsim prints times."""
    for scale, unit in ((1, "s"), (1e-3, "ms"), (1e-6, "us")):
        if seconds >= scale:
            return f"{seconds / scale:.4g} {unit}"
    return f"{seconds * 1e9:.4g} ns" if seconds > 0 else "0 s"


def format_bytes(size_bytes):
    """Binary units, as trainsim prints them: '4.2 MiB'."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size_bytes < 1024:
            return f"{size_bytes:.3g} {unit}"
        size_bytes /= 1024
    return f"{size_bytes:.3g} TiB"


def format_count(count):
    """'2.25M', '915k', '622'."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if count >= scale:
            return f"{count / scale:.3g}{suffix}"
    return f"{count:.3g}"


def peak_memory_bytes(prediction):
    return max(prediction.get("memory_bytes_per_device") or [0])


# ---------------------------------------------------------------- HTML pieces

def table(header, rows, numeric, row_classes=None):
    """An HTML table; `numeric[i]` right-aligns column i; cells are escaped."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = []
    for r, row in enumerate(rows):
        css = f' class="{row_classes[r]}"' if row_classes and row_classes[r] else ""
        cells = "".join(f'<td{" class=num" if numeric[i] else ""}>{html.escape(str(c))}</td>'
                        for i, c in enumerate(row))
        body.append(f"<tr{css}>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def rank_text(entry, position):
    """A rank as trainsim prints it: "3", "3=" in a tie, "-" when excluded;
    a file without ranks counts the feasible entries before it."""
    if not entry["feasible"]:
        return "-"
    rank = int(entry.get("rank", position))
    return f"{rank}=" if entry.get("tied") else str(rank)


def ranking_table(choice):
    """choose's ranking, in trainsim's order: feasible strategies with their
    rank ("1=" for a tie), excluded ones with the reason. An iteration's
    samples are shown beside its time: a data-parallel step and a pipeline's
    mini-batch are different amounts of work."""
    rows, classes, position = [], [], 0
    for entry in choice["ranked"]:
        p = entry["prediction"]
        settings = " ".join(f"{k}={v}" for k, v in entry.get("settings", {}).items()) or "defaults"
        position += entry["feasible"]
        samples = p.get("samples_per_iteration")
        rows.append([rank_text(entry, position), entry["strategy"], settings, format_count(p["samples_per_s"]),
                     f"{p['speedup_vs_single']:.2f}x", format_count(samples) if samples is not None else "",
                     format_seconds(p["iteration_s"]), p.get("dominant", ""), format_bytes(peak_memory_bytes(p)),
                     p.get("staleness", ""), "" if entry["feasible"] else f"excluded: {entry.get('reason', '')}"])
        classes.append("" if entry["feasible"] else "excluded")
    header = ["#", "strategy", "settings", "samples/s", "speedup", "samples/iter", "time/iter", "dominant cost",
              "memory/device", "staleness", "note"]
    html_table = table(header, rows, [True, False, False, True, True, True, True, False, True, True, False], classes)
    if any(entry.get("tied") for entry in choice["ranked"]) and choice.get("tie_rule"):
        html_table += f'<p class="meta">{html.escape(choice["tie_rule"])}</p>'
    return html_table


def prediction_table(prediction):
    """Analytic and simulated samples/s and time per iteration per strategy,
    with the samples an iteration trains, and the peak memory of a device,
    flagged when it exceeds the device's."""
    analytic = common.prediction_results(prediction, "analytic")
    simulated = common.prediction_results(prediction, "simulated")
    rows = []
    for strategy in list(analytic) + [s for s in simulated if s not in analytic]:
        a, s = analytic.get(strategy), simulated.get(strategy)
        gap = ""
        if a and s and a["iteration_s"] > 0:
            relative = (s["iteration_s"] - a["iteration_s"]) / a["iteration_s"]
            gap = f"{relative:+.1%}" if abs(relative) >= 5e-4 else "0.0%"  # no "-0.0%"
        memory = format_bytes(peak_memory_bytes(a or s))
        if not (a or s).get("fits_memory", True):
            memory += " (does not fit)"
        samples = (a or s).get("samples_per_iteration")
        rows.append([strategy, format_count(a["samples_per_s"]) if a else "",
                     format_count(s["samples_per_s"]) if s else "",
                     format_count(samples) if samples is not None else "",
                     format_seconds(a["iteration_s"]) if a else "", format_seconds(s["iteration_s"]) if s else "",
                     gap, memory])
    header = ["strategy", "analytic samples/s", "simulated samples/s", "samples/iter", "analytic time/iter",
              "simulated time/iter", "simulated vs analytic", "memory/device"]
    return table(header, rows, [False, True, True, True, True, True, True, True])


def figure_html(fig, fig_id, alt, caption):
    """<figure> with the figure as an inline PNG (closes `fig`)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    common.plt.close(fig)
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return (f'<figure><img id="{fig_id}" alt="{html.escape(alt, quote=True)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{html.escape(caption)}</figcaption></figure>")


def mid_run_iterations(trace):
    """(first, last) of TIMELINE_ITERATIONS iterations in the middle of the
    trace, or None when its ops carry no iteration."""
    iterations = sorted({e.args["iteration"] for e in trace.events if isinstance(e.args.get("iteration"), int)})
    if not iterations:
        return None
    first = iterations[max(0, len(iterations) // 2 - TIMELINE_ITERATIONS // 2)]
    return first, min(iterations[-1], first + TIMELINE_ITERATIONS - 1)


# ---------------------------------------------------------------- the page

def figures(prediction, choice, traces):
    """The page's <figure>s: speedup bars, two breakdown stacks, the winner's timeline."""
    parts = []
    analytic = speedup.speedup_values(prediction, method="analytic")
    simulated = {s: r["speedup_vs_single"] for s, r in common.prediction_results(prediction, "simulated").items()
                 if r.get("speedup_vs_single") is not None}
    fig = speedup.plot_speedup(analytic, paper=simulated or None, label="analytic", paper_label="simulated")
    fig.axes[0].set_title("speedup over one device, default settings")
    parts.append(figure_html(fig, "fig-speedup", "Bars of each strategy's speedup over one device, analytic and "
                             "simulated", "Speedup over one device per strategy (analytic and simulated)."))
    for method in common.METHODS:
        if not common.prediction_results(prediction, method):
            continue
        fig = breakdown.plot_breakdown(prediction, method=method)
        fig.axes[0].set_title(f"where an iteration goes ({method})")
        parts.append(figure_html(fig, f"fig-breakdown-{method}",
                                 f"Stacked bars of each strategy's {method} iteration time: compute, exposed "
                                 "communication, idle on transfers, idle from imbalance",
                                 f"Breakdown of one iteration, {method} model."))
    winners = [e["strategy"] for e in choice["ranked"] if e["feasible"]]
    if winners and winners[0] in traces:
        trace = common.load_trace(traces[winners[0]])
        iterations = mid_run_iterations(trace)
        fig = timeline.plot_timeline(trace, iterations=iterations)
        shown = f"iterations {iterations[0]}-{iterations[1]}" if iterations else "all iterations"
        fig.axes[0].set_title(f"{winners[0]}, simulated ({shown})")
        parts.append(figure_html(fig, "fig-timeline", f"Timeline of the simulated schedule of {winners[0]}: one "
                                 "row per worker and stream, ops coloured by kind",
                                 f"Simulated schedule of the winner, {winners[0]}, at its chosen settings "
                                 f"({shown}; trace-{winners[0]}.json opens in Perfetto)."))
    return parts


def render_page(prediction, choice, traces, date):
    """index.html's text."""
    model, cluster, batch = choice["model"], choice["cluster"], int(choice["batch_size"])
    title = f"trainsim report: {model} on {cluster}"
    traced = ", ".join(f"trace-{s}.json" for s in traces) or "none"
    body = [
        f"<h1>{html.escape(title)}</h1>",
        f'<p class="meta">model {html.escape(model)}, batch {batch} per device, cluster {html.escape(cluster)}; '
        f"inputs written {date}</p>",
        "<h2>Strategies at their best settings (trainsim choose)</h2>",
        ranking_table(choice),
        f'<p class="why">{html.escape(choice.get("why", ""))}</p>',
        "<h2>Predictions at default settings (trainsim predict --method both)</h2>",
        prediction_table(prediction),
        "<h2>Figures</h2>",
        *figures(prediction, choice, traces),
        f'<p class="meta">Files beside this page: prediction.json, choice.json, {html.escape(traced)}.</p>',
    ]
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            f"<style>{STYLE}</style></head>\n<body>\n" + "\n".join(body) +
            f"\n<script>{LOADED_SCRIPT}</script>\n</body></html>\n")


def write_report(out_dir):
    """Writes out_dir/index.html from the JSON files in out_dir; returns its path."""
    prediction, choice, traces, date = read_inputs(out_dir)
    if choice.get("format") == "trainsim.llm-choice/1":
        page = report_llm.render_page(prediction, choice, traces, date, sys.modules[__name__])
    else:
        page = render_page(prediction, choice, traces, date)
    path = os.path.join(out_dir, "index.html")
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write(page)
    os.replace(path + ".tmp", path)
    return path


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dir", metavar="DIR", help="folder holding prediction.json, choice.json and trace-*.json")
    write_report(p.parse_args(argv).dir)


if __name__ == "__main__":
    common.run_cli(main)
