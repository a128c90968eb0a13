"""The HTML page of `trainsim report --model TRANSFORMER`, from the JSON it wrote.

prediction.json (trainsim.llm-prediction/1: each way of spreading the model
at its fastest configuration that fits, in closed form and simulated),
choice.json (trainsim.llm-choice/1: the 3-D search's best configurations and
why the first) and trace-<family>.json (the winner's pipeline, simulated).
report.py calls render_page when choice.json is a trainsim.llm-choice/1.
"""
import html

from analysis.plots import common, timeline

# The parts of a closed-form iteration the stacked bars draw, from a
# step's fields (docs/formats.md, trainsim.llm-prediction/1).
ITERATION_PARTS = (
    ("compute and sends", "#4c72b0"),
    ("bubble", "#dd8452"),
    ("tensor-parallel all-reduces", "#55a868"),
    ("ZeRO not hidden", "#c44e52"),
    ("data-parallel step", "#8172b3"),
    ("optimizer", "#937860"),
)
MEMORY_PARTS = (("weights", "#4c72b0"), ("gradients", "#55a868"), ("optimizer", "#dd8452"),
                ("activations", "#8172b3"))
STEP_KEYS = ("iteration_s", "pipeline_s", "bubble_s", "tensor_parallel_s", "sharding_s", "data_parallel_s",
             "optimizer_s", "flops_per_gpu_per_s")
MEMORY_KEYS = ("weights_bytes", "gradients_bytes", "optimizer_bytes", "activations_bytes", "total_bytes")
TRAINING_KEYS = ("tp", "pp", "dp", "micro_batch", "interleave", "zero")


def check_training(entry, at):
    for key in TRAINING_KEYS:
        common.number(entry, key, at, minimum=0)
    common.text(entry, "recompute", at)


def load_prediction(source):
    """trainsim.llm-prediction/1, its fields checked."""
    data, where = common.read_json(source)
    common.check_format(data, where, "llm-prediction")
    for key in ("model", "machine"):
        common.text(data, key, where)
    for key in ("gpus", "global_batch"):
        common.number(data, key, where, minimum=1)
    for i, entry in enumerate(common.records(data, "families", where)):
        at = f"{where}: families[{i}]"
        common.text(entry, "family", at)
        for key, keys in (("training", ()), ("memory", MEMORY_KEYS), ("analytic", STEP_KEYS)):
            if not isinstance(entry.get(key), dict):
                raise common.FormatError(f"{at}: {key}", "is missing", "an object")
            for k in keys:
                common.number(entry[key], k, f"{at}: {key}", minimum=0)
        check_training(entry["training"], f"{at}: training")
        if "simulated" in entry:
            common.number(entry["simulated"], "iteration_s", f"{at}: simulated", minimum=0)
    return data


def load_choice(source):
    """trainsim.llm-choice/1, its fields checked."""
    data, where = common.read_json(source)
    common.check_format(data, where, "llm-choice")
    for key in ("model", "machine", "why"):
        common.text(data, key, where)
    common.number(data, "memory_limit_bytes", where, minimum=0)
    for i, entry in enumerate(common.records(data, "ranked", where)):
        at = f"{where}: ranked[{i}]"
        check_training(entry, at)
        for key in ("memory_bytes", "iteration_s", "simulated_iteration_s", "flops_per_gpu_per_s"):
            common.number(entry, key, at, minimum=0)
    return data


def iteration_parts(step):
    """Seconds of each ITERATION_PARTS entry in a closed-form step."""
    bubble, tp, zero = step["bubble_s"], step["tensor_parallel_s"], step["sharding_s"]
    return (max(0.0, step["pipeline_s"] - bubble - tp - zero), bubble, tp, zero, step["data_parallel_s"],
            step["optimizer_s"])


def settings_text(t):
    text = f"t={t['tp']} p={t['pp']} d={t['dp']} b={t['micro_batch']}"
    if t["interleave"] > 1:
        text += f" v={t['interleave']}"
    text += f" recompute={t['recompute']}"
    text += " SP" if t.get("sequence_parallel") else ""
    text += " flash" if t.get("flash_attention") else ""
    return text + (f" ZeRO-{t['zero']}" if t["zero"] else "")


def family_table(prediction, fmt):
    rows = []
    for f in prediction["families"]:
        step, sim = f["analytic"], f.get("simulated")
        gap = ""
        if sim and step["iteration_s"] > 0:
            gap = f"{sim['iteration_s'] / step['iteration_s'] - 1:+.1%}"
        rows.append([f["family"], settings_text(f["training"]), fmt.format_bytes(f["memory"]["total_bytes"]),
                     fmt.format_seconds(step["iteration_s"]), f"{step['bubble_s'] / step['iteration_s']:.1%}",
                     fmt.format_seconds(sim["iteration_s"]) if sim else "",
                     ("the whole job" if sim.get("whole_job") else "a pipeline + closed-form DP") if sim else "",
                     gap, f"{step['flops_per_gpu_per_s'] / 1e12:.0f}"])
    for family in prediction.get("none_fit", []):
        rows.append([family, "no configuration fits a GPU", "", "", "", "", "", "", ""])
    header = ["strategy", "settings", "memory/GPU", "analytic iteration", "bubble", "simulated iteration",
              "simulated as", "simulated vs analytic", "TFLOP/s a GPU (analytic)"]
    return fmt.table(header, rows, [False, False, True, True, True, True, False, True, True])


def ranking_table(choice, fmt):
    rows = []
    for i, k in enumerate(choice["ranked"]):
        sim = k["simulated_iteration_s"]
        rows.append([str(i + 1), k.get("family", ""), settings_text(k), k.get("schedule", ""),
                     fmt.format_bytes(k["memory_bytes"]), fmt.format_seconds(k["iteration_s"]),
                     fmt.format_seconds(sim) if sim > 0 else "-", f"{k['flops_per_gpu_per_s'] / 1e12:.0f}"])
    header = ["#", "strategy", "settings", "schedule", "memory/GPU", "analytic iteration", "simulated iteration",
              "TFLOP/s a GPU"]
    return fmt.table(header, rows, [True, False, False, False, True, True, True, True])


def stacked_bars(families, parts, xlabel):
    """Horizontal bars, a family each, stacked from `parts`: (label, colour,
    the part's value for a family)."""
    fig, ax = common.figure_and_axes(None, size=(9, 1.0 + 0.45 * max(1, len(families))))
    left = [0.0] * len(families)
    for label, colour, value in parts:
        widths = [value(f) for f in families]
        ax.barh(range(len(families)), widths, left=left, color=colour, label=label)
        left = [a + b for a, b in zip(left, widths)]
    ax.set_yticks(range(len(families)), [f["family"] for f in families])
    ax.invert_yaxis()
    ax.set_xlabel(xlabel)
    return fig, ax


def plot_iterations(prediction):
    """Stacked bars of each family's closed-form iteration by part, with its
    simulated iteration as a marker."""
    families = prediction["families"]
    parts = [(label, colour, lambda f, p=p: iteration_parts(f["analytic"])[p])
             for p, (label, colour) in enumerate(ITERATION_PARTS)]
    fig, ax = stacked_bars(families, parts, "seconds an iteration")
    simulated = [(i, f["simulated"]["iteration_s"]) for i, f in enumerate(families) if "simulated" in f]
    if simulated:
        ax.plot([s for _, s in simulated], [i for i, _ in simulated], "k|", markersize=18, label="simulated")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    return fig


def plot_memory(prediction, memory_bytes):
    """Stacked bars of each family's memory a GPU by part, and the limit."""
    parts = [(label, colour, lambda f, label=label: f["memory"][f"{label}_bytes"] / 2**30)
             for label, colour in MEMORY_PARTS]
    fig, ax = stacked_bars(prediction["families"], parts, "GiB a GPU (the first pipeline stage's)")
    if memory_bytes > 0:
        ax.axvline(memory_bytes / 2**30, color="black", linestyle="--", label="a GPU's memory")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    return fig


def stage_firsts(trace, best):
    """A whole job's trace (t·p·d workers in Megatron-LM's rank order, worker
    (k·d + e)·t + q) cut to the first GPU of each stage, k·d·t."""
    tp, pp, dp = int(best["tp"]), int(best["pp"]), int(best["dp"])
    keep = {k * dp * tp for k in range(pp)}
    return common.Trace(events=[e for e in trace.events if e.worker in keep],
                        worker_names={w: n for w, n in trace.worker_names.items() if w in keep},
                        stream_names={lane: n for lane, n in trace.stream_names.items() if lane[0] in keep})


def middle_iteration(trace):
    """(i, i): the middle iteration of the trace's ops (0 when none says)."""
    iterations = sorted({e.args["iteration"] for e in trace.events if isinstance(e.args.get("iteration"), int)})
    middle = iterations[len(iterations) // 2] if iterations else 0
    return middle, middle


def figures(prediction, choice, traces, fmt):
    parts = []
    if prediction["families"]:
        parts.append(fmt.figure_html(plot_iterations(prediction), "fig-iteration",
                                     "Stacked bars of each strategy's closed-form iteration by part, with a mark at "
                                     "its simulated iteration", "Where an iteration goes, closed form by part; the "
                                     "mark is the simulated iteration."))
        parts.append(fmt.figure_html(plot_memory(prediction, choice["memory_limit_bytes"]), "fig-memory",
                                     "Stacked bars of each strategy's memory a GPU by part, and the GPU's memory",
                                     "Memory a GPU by part (the first pipeline stage's device)."))
    traced = choice.get("trace")
    if choice["ranked"] and isinstance(traced, dict) and traced.get("file") in {f"trace-{s}.json" for s in traces}:
        family = choice["ranked"][0].get("family", "")
        trace = common.load_trace(traces[traced["file"][len("trace-"):-len(".json")]])
        whole_job = bool(traced.get("whole_job"))
        if whole_job:
            trace = stage_firsts(trace, choice["ranked"][0])
        what = "whole job" if whole_job else "pipeline (one GPU a stage)"
        fig = timeline.plot_timeline(trace, iterations=middle_iteration(trace))
        fig.axes[0].set_title(f"the winner ({family}): its {what} simulated, the first GPU of each stage")
        parts.append(fmt.figure_html(fig, "fig-timeline", f"Timeline of the winner's simulated {what}: one row per "
                                     "stage's first GPU and stream, ops coloured by kind",
                                     f"The winner's {what} simulated event by event, one iteration, the first GPU "
                                     f"of each pipeline stage ({traced['file']}"
                                     f"{' holds every GPU and' if whole_job else ''} opens in Perfetto)."))
    return parts


def render_page(prediction, choice, traces, date, fmt):
    """index.html's text; `fmt` is report.py (its tables, numbers and figures)."""
    model, machine = choice["model"], choice["machine"]
    title = f"trainsim report: {model} on {choice['gpus']} GPUs of {machine}"
    traced = ", ".join(f"trace-{s}.json" for s in traces) or "none"
    body = [
        f"<h1>{html.escape(title)}</h1>",
        f'<p class="meta">transformer {html.escape(model)}, {int(choice["global_batch"])} sequences an iteration, '
        f"{int(choice['gpus'])} GPUs on {html.escape(machine)} machines; {int(choice['fit'])} of "
        f"{int(choice['evaluated'])} configurations fit; inputs written {date}</p>",
        "<h2>The 3-D search's best (trainsim choose)</h2>",
        ranking_table(choice, fmt),
        f'<p class="why">{html.escape(choice["why"])}</p>',
        "<h2>Each way of spreading it at its fastest (trainsim predict --method both)</h2>",
        family_table(prediction, fmt),
        "<h2>Figures</h2>",
        *figures(prediction, choice, traces, fmt),
        f'<p class="meta">Files beside this page: prediction.json, choice.json, {html.escape(traced)}.</p>',
    ]
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            f"<style>{fmt.STYLE}</style></head>\n<body>\n" + "\n".join(body) +
            f"\n<script>{fmt.LOADED_SCRIPT}</script>\n</body></html>\n")
