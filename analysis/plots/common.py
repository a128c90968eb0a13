"""Loaders for trainsim's outputs and the helpers every plot module shares.

Each loader takes a path (or an already-parsed dict), checks the fields the
plots read against docs/formats.md and returns plain Python data,
so notebooks can inspect it. Bad input raises FormatError, whose message names
the file and field, what is wrong and what was expected.
"""
import argparse
import csv
import json
import math
import os
import sys
from dataclasses import dataclass, field

import matplotlib

if "MPLBACKEND" not in os.environ and "matplotlib.pyplot" not in sys.modules:
    matplotlib.use("Agg")  # files, not windows: the scripts run headless and in tests
import matplotlib.pyplot as plt  # noqa: E402  (after the backend choice)

# Keys of a breakdown, in the order the stacks draw them (docs/formats.md, Prediction).
BREAKDOWN_PARTS = ("compute", "exposed_comm", "idle_transfer", "idle_imbalance")
METHODS = ("analytic", "simulated")


class FormatError(ValueError):
    """A trainsim file that does not hold what its format promises."""

    def __init__(self, where, what, expected):
        super().__init__(f"{where}: {what} ({expected})")
        self.where, self.what, self.expected = where, what, expected


# ---------------------------------------------------------------- JSON basics

def read_json(source):
    """(parsed JSON, where): `source` is a path or an already-parsed dict;
    `where` names it in errors."""
    if isinstance(source, dict):
        return source, "<dict>"
    where = os.fspath(source)
    try:
        with open(where, encoding="utf-8") as f:
            return json.load(f), where
    except OSError as e:
        raise FormatError(where, f"cannot be read: {e.strerror}", "a readable file") from e
    except json.JSONDecodeError as e:
        raise FormatError(where, f"is not JSON: {e.msg} at line {e.lineno}", "a JSON document") from e


def check_format(data, where, kind):
    """`data` carries "format": "trainsim.<kind>/1"."""
    expected = f"trainsim.{kind}/1"
    if not isinstance(data, dict):
        raise FormatError(where, f"holds a {type(data).__name__}", f"a JSON object with format {expected}")
    got = data.get("format")
    if got != expected:
        raise FormatError(f"{where}: format", f"is {got!r}", expected)


def number(obj, key, where, required=True, minimum=None):
    """obj[key] as a finite float; None when absent and not required."""
    if key not in obj or obj[key] is None:
        if required:
            raise FormatError(f"{where}: {key}", "is missing", "a number")
        return None
    return finite(obj[key], f"{where}: {key}", minimum)


def finite(value, where, minimum=None):
    """`value` as a float, or FormatError when it is not a finite number >= minimum."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise FormatError(where, f"is {value!r}", "a finite number")
    if minimum is not None and value < minimum:
        raise FormatError(where, f"is {value!r}", f"a number >= {minimum}")
    return float(value)


def text(obj, key, where):
    value = obj.get(key)
    if not isinstance(value, str) or not value:
        raise FormatError(f"{where}: {key}", "is missing" if value is None else f"is {value!r}", "a non-empty string")
    return value


def records(data, key, where):
    """data[key] as a list of objects."""
    items = data.get(key)
    if not isinstance(items, list):
        raise FormatError(f"{where}: {key}", "is missing" if items is None else "is not a list", "a list of objects")
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise FormatError(f"{where}: {key}[{i}]", f"is a {type(item).__name__}", "an object")
    return items


# ---------------------------------------------------------------- prediction

def load_prediction(source):
    """trainsim.prediction/1: the dict, each result checked (strategy, method,
    iteration_s, samples_per_s, speedup_vs_single, breakdown_s)."""
    data, where = read_json(source)
    check_format(data, where, "prediction")
    for i, r in enumerate(records(data, "results", where)):
        at = f"{where}: results[{i}]"
        text(r, "strategy", at)
        if r.get("method", "analytic") not in METHODS:
            raise FormatError(f"{at}: method", f"is {r.get('method')!r}", "analytic or simulated")
        number(r, "iteration_s", at, minimum=0)
        number(r, "samples_per_s", at, minimum=0)
        number(r, "speedup_vs_single", at, required=False, minimum=0)
        breakdown = r.get("breakdown_s", {})
        if not isinstance(breakdown, dict):
            raise FormatError(f"{at}: breakdown_s", "is not an object", "seconds per part")
        for part in BREAKDOWN_PARTS:
            number(breakdown, part, f"{at}: breakdown_s", minimum=0)
    return data


def prediction_results(prediction, method="analytic"):
    """{strategy: result} of one method, in the file's order."""
    return {r["strategy"]: r for r in prediction["results"] if r.get("method", "analytic") == method}


# ---------------------------------------------------------------- simulation / chunking

def load_simulation(source):
    """trainsim.simulation/1 (trainsim simulate --json): strategy, iteration_s,
    straggler, per-worker breakdown_s."""
    data, where = read_json(source)
    check_format(data, where, "simulation")
    text(data, "strategy", where)
    number(data, "iteration_s", where, minimum=0)
    straggler = data.get("straggler", {"probability": 0.0, "slowdown": 1.0})
    number(straggler, "probability", f"{where}: straggler", minimum=0)
    number(straggler, "slowdown", f"{where}: straggler", minimum=1)
    data["straggler"] = straggler
    for i, w in enumerate(records(data, "workers", where)):
        for part in BREAKDOWN_PARTS:
            number(w.get("breakdown_s", {}), part, f"{where}: workers[{i}]: breakdown_s", minimum=0)
    return data


def load_chunking(source):
    """trainsim.chunking/1 (trainsim chunk --json): backward_s, chunk_size and,
    by method, a `curve` (uniform) or `trials` (heuristic)."""
    data, where = read_json(source)
    check_format(data, where, "chunking")
    number(data, "backward_s", where, minimum=0)
    number(data, "chunk_size", where, required=False, minimum=1)
    number(data, "compute_backward_s", where, required=False, minimum=0)
    for key, time_key in (("curve", "backward_s"), ("trials", "lapse_s")):
        if key in data:
            for i, point in enumerate(records(data, key, where)):
                number(point, "chunk_size", f"{where}: {key}[{i}]", minimum=1)
                number(point, time_key, f"{where}: {key}[{i}]", minimum=0)
    return data


# ---------------------------------------------------------------- run / validation

def load_run(source):
    """trainsim.run/1: iteration_s (median), samples_per_s; the optional
    iteration_min_s / iteration_max_s and loss_per_iteration are checked when
    present."""
    data, where = read_json(source)
    check_format(data, where, "run")
    number(data, "iteration_s", where, minimum=0)
    number(data, "samples_per_s", where, minimum=0)
    for key in ("iteration_min_s", "iteration_max_s"):
        number(data, key, where, required=False, minimum=0)
    losses = data.get("loss_per_iteration")
    if losses is not None:
        if not isinstance(losses, list):
            raise FormatError(f"{where}: loss_per_iteration", "is not a list", "one loss per iteration")
        for i, loss in enumerate(losses):
            finite(loss, f"{where}: loss_per_iteration[{i}]")
    return data


def relative_error(predicted_s, measured_s):
    """(predicted - measured) / measured: positive when the prediction is slower."""
    return (predicted_s - measured_s) / measured_s


def load_validation(source):
    """trainsim.validation/1: `results`, one object per strategy with
    measured_s and predicted_analytic_s / predicted_simulated_s. error_analytic /
    error_simulated are filled in from the times when the file omits them."""
    data, where = read_json(source)
    check_format(data, where, "validation")
    for i, r in enumerate(records(data, "results", where)):
        at = f"{where}: results[{i}]"
        text(r, "strategy", at)
        measured_s = number(r, "measured_s", at, minimum=0)
        if measured_s == 0:
            raise FormatError(f"{at}: measured_s", "is 0", "a positive time")
        found = False
        for method in METHODS:
            predicted_s = number(r, f"predicted_{method}_s", at, required=False, minimum=0)
            if predicted_s is None:
                continue
            found = True
            if number(r, f"error_{method}", at, required=False) is None:
                r[f"error_{method}"] = relative_error(predicted_s, measured_s)
        if not found:
            raise FormatError(at, "has no prediction", "predicted_analytic_s or predicted_simulated_s")
    return data


# ---------------------------------------------------------------- metrics CSV

def load_metrics(path):
    """A `--metrics` CSV: {column: [float]} with at least `iteration` and `loss`;
    empty cells read as NaN (columns filled only once per epoch)."""
    where = os.fspath(path)
    try:
        with open(where, newline="", encoding="utf-8") as f:
            rows = list(csv.reader(f))
    except OSError as e:
        raise FormatError(where, f"cannot be read: {e.strerror}", "a readable CSV file") from e
    if not rows:
        raise FormatError(where, "is empty", "a header line with iteration,loss,...")
    header = [h.strip() for h in rows[0]]
    for needed in ("iteration", "loss"):
        if needed not in header:
            raise FormatError(f"{where}: header", f"has no column {needed!r}", "columns iteration, loss, ...")
    columns = {h: [] for h in header}
    for line, row in enumerate(rows[1:], start=2):
        if not row:
            continue
        if len(row) != len(header):
            raise FormatError(f"{where}:{line}", f"has {len(row)} cells", f"{len(header)} as in the header")
        for name, cell in zip(header, row):
            cell = cell.strip()
            try:
                columns[name].append(float(cell) if cell else math.nan)
            except ValueError:
                raise FormatError(f"{where}:{line}: {name}", f"is {cell!r}", "a number or an empty cell") from None
    return columns


# ---------------------------------------------------------------- trace

@dataclass
class TraceEvent:
    worker: int
    stream: int
    name: str
    op: str
    start_s: float
    duration_s: float
    args: dict


@dataclass
class Trace:
    """A Chrome trace: one process per worker, one thread per stream."""
    events: list
    worker_names: dict = field(default_factory=dict)  # pid -> name
    stream_names: dict = field(default_factory=dict)  # (pid, tid) -> name

    def lanes(self):
        """(worker, stream) pairs that are declared or hold events, sorted."""
        return sorted(set(self.stream_names) | {(e.worker, e.stream) for e in self.events})

    def lane_label(self, lane):
        worker, stream = lane
        return f"w{worker} {self.stream_names.get(lane, f'stream {stream}')}"


def _integer(event, key, where):
    """A trace event's pid or tid (0 when absent, as Chrome reads it)."""
    value = event.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int):
        raise FormatError(f"{where}: {key}", f"is {value!r}", "an integer (worker or stream id)")
    return value


def load_trace(source):
    """Chrome trace JSON ({"traceEvents": [...]} or a bare list): complete
    events ("ph": "X", microseconds) become TraceEvents in seconds; process and
    thread names come from the "M" metadata events."""
    data, where = read_json(source) if not isinstance(source, list) else (source, "<list>")
    raw = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(raw, list):
        raise FormatError(f"{where}: traceEvents", "is missing", "a Chrome trace: {\"traceEvents\": [...]}")
    trace = Trace(events=[])
    for i, e in enumerate(raw):
        at = f"{where}: traceEvents[{i}]"
        if not isinstance(e, dict):
            raise FormatError(at, f"is a {type(e).__name__}", "an event object")
        ph = e.get("ph")
        if ph == "M":
            name = (e.get("args") or {}).get("name", "")
            if e.get("name") == "process_name":
                trace.worker_names[_integer(e, "pid", at)] = name
            elif e.get("name") == "thread_name":
                trace.stream_names[(_integer(e, "pid", at), _integer(e, "tid", at))] = name
        elif ph == "X":
            ts_us = number(e, "ts", at)
            dur_us = number(e, "dur", at, minimum=0)
            args = e.get("args") or {}
            op = args.get("op") or e.get("cat") or e.get("name") or "?"
            trace.events.append(TraceEvent(_integer(e, "pid", at), _integer(e, "tid", at), str(e.get("name", op)),
                                           str(op), ts_us * 1e-6, dur_us * 1e-6, args))
    if not trace.events:
        raise FormatError(where, "has no complete (\"ph\": \"X\") events", "at least one timed op")
    return trace


# ---------------------------------------------------------------- figures and CLIs

def figure_and_axes(ax, size=(7, 4)):
    """(figure, axes): the caller's axes, or a new figure of `size` inches."""
    if ax is not None:
        return ax.figure, ax
    fig, ax = plt.subplots(figsize=size, layout="constrained")
    return fig, ax


def save(fig, out):
    """Writes `fig` to `out` (format from the extension) and closes it."""
    fig.savefig(out, dpi=120)
    plt.close(fig)


def parser(description, inputs_help, many=False):
    """argparse parser with INPUT(s), --out and --title."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("inputs", nargs="+" if many else None, metavar="INPUT", help=inputs_help)
    p.add_argument("--out", required=True, help="image to write (.png, .svg, .pdf)")
    p.add_argument("--title", help="axes title")
    return p


def run_cli(main, argv=None):
    """Runs main(argv); bad input exits with status 2 and one line
    `error: <where>: <what> (<expected>)`, as trainsim does."""
    try:
        main(argv)
    except FormatError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    except OSError as e:  # mostly --out in a folder that does not exist
        print(f"error: {e.filename}: cannot be written: {e.strerror} (a path in an existing folder)",
              file=sys.stderr)
        sys.exit(2)


def setting(data):
    """'model, batch B, on cluster' of a trainsim output, for default titles."""
    batch = data.get("batch_size", data.get("batch"))
    return f"{data.get('model', '?')}{f', batch {batch}' if batch else ''} on {data.get('cluster', '?')}"


def run_labels(outputs):
    """One distinct label per trainsim output: its strategy, preceded by the
    model where the outputs span several, numbered where still repeated."""
    labels = [o.get("strategy", "?") for o in outputs]
    if len(set(labels)) < len(labels) and len({o.get("model") for o in outputs}) > 1:
        labels = [f"{o.get('model', '?')} {label}" for o, label in zip(outputs, labels)]
    counts, seen = {label: labels.count(label) for label in labels}, {}
    for i, label in enumerate(labels):
        seen[label] = seen.get(label, 0) + 1
        if counts[label] > 1:
            labels[i] = f"{label} #{seen[label]}"
    return labels


def load_mapping(source, what):
    """A {label: number} JSON (paper values): path or dict."""
    data, where = read_json(source)
    if not isinstance(data, dict) or not data:
        raise FormatError(where, "is not a non-empty object", f"{what} as {{label: number}}")
    return {str(k): number(data, k, where) for k in data}
