"""What the seed notebooks share: finding and running the trainsim binary
(JSON outputs parsed), cluster files derived from a preset, plain tables
without pandas, and saving each notebook's key figure.

The binary is $TRAINSIM, else ../build/tools/trainsim; figures go to
$TRAINSIM_FIGURES, else ../docs/figures (both relative to this folder).
"""
import json
import os
import subprocess
import sys

NOTEBOOKS_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(NOTEBOOKS_DIR)
if REPO_ROOT not in sys.path:  # `from analysis.plots import ...` without PYTHONPATH
    sys.path.insert(0, REPO_ROOT)


def trainsim_binary():
    """Path of the trainsim executable: $TRAINSIM, else build/tools/trainsim of this repository."""
    path = os.environ.get("TRAINSIM") or os.path.join(REPO_ROOT, "build", "tools", "trainsim")
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise FileNotFoundError(f"trainsim binary {path} is not an executable file "
                                "(build it with `make`, or set $TRAINSIM)")
    return path


def run(*args):
    """Runs `trainsim args...` and returns its standard output parsed as JSON
    (pass `--json -`, or `cluster show NAME --json`). A failing run raises
    RuntimeError with the command and trainsim's message."""
    command = [trainsim_binary(), *map(str, args)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}): {done.stderr.strip()}")
    return json.loads(done.stdout)


def _options(model, cluster, batch, settings):
    args = ["--model", model, "--cluster", cluster]
    if batch is not None:
        args += ["--batch", batch]
    for setting in settings:
        args += ["--set", setting]
    return args


def predict(model, cluster, strategies, batch=None, settings=(), method="analytic"):
    """{strategy: result} of `trainsim predict` (trainsim.prediction/1 results,
    one method); `settings` are --set key=value strings."""
    data = run("predict", *_options(model, cluster, batch, settings), "--strategies", ",".join(strategies),
               "--method", method, "--json", "-")
    return {r["strategy"]: r for r in data["results"] if r.get("method", "analytic") == method}


def simulate(model, cluster, strategy, batch=None, settings=(), iterations=20, straggler=None, seed=1):
    """The trainsim.simulation/1 dict of `trainsim simulate`; `straggler` is
    'PROB:SLOWDOWN' or None."""
    args = ["simulate", *_options(model, cluster, batch, settings), "--strategy", strategy,
            "--iterations", iterations, "--seed", seed, "--json", "-"]
    if straggler:
        args += ["--straggler", straggler]
    return run(*args)


def derived_cluster(preset, path, **changes):
    """Writes the cluster file of `preset` with top-level fields replaced
    (e.g. devices_per_machine=2, name=...) to `path`; returns `path`."""
    cluster = run("cluster", "show", preset, "--json")
    unknown = sorted(set(changes) - set(cluster))
    if unknown:
        raise KeyError(f"cluster {preset} has no field {', '.join(unknown)}")
    cluster.update(changes)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(cluster, f, indent=2)
    return path


def figures_dir():
    """The folder for the notebooks' figures ($TRAINSIM_FIGURES, else docs/figures), created."""
    path = os.environ.get("TRAINSIM_FIGURES") or os.path.join(REPO_ROOT, "docs", "figures")
    os.makedirs(path, exist_ok=True)
    return path


def save_figure(fig, name):
    """Saves `fig` as figures_dir()/name at 120 dpi, closes it and shows the
    saved PNG in the notebook (so the notebook shows what docs/ holds, under
    any matplotlib backend); returns the path."""
    import matplotlib.pyplot as plt

    path = os.path.join(figures_dir(), name)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    try:
        from IPython.display import Image, display
    except ImportError:
        return path
    display(Image(filename=path))
    return path


def markdown_table(header, rows):
    """A Markdown table: one row per sequence, cells as given (str() applied)."""
    lines = ["| " + " | ".join(map(str, header)) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(map(str, row)) + " |" for row in rows]
    return "\n".join(lines)


def show_table(header, rows):
    """Displays markdown_table(header, rows) in the notebook (and prints it when not in IPython)."""
    table = markdown_table(header, rows)
    try:
        from IPython.display import Markdown, display
    except ImportError:
        print(table)
        return
    display(Markdown(table))


def mean(values):
    values = list(values)
    return sum(values) / len(values)
