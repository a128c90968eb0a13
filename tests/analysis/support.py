"""Shared test helpers: the hand-made files in data/, real trainsim outputs
made on demand (skipped with a printed reason when $TRAINSIM is unusable), and
rendering a figure to a PNG."""
import functools
import os
import subprocess
import sys
import tempfile
import unittest

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
_OUTPUTS = tempfile.TemporaryDirectory(prefix="trainsim-analysis-")


def data(name):
    """Path of a hand-made file in tests/analysis/data."""
    return os.path.join(DATA_DIR, name)


@functools.lru_cache(maxsize=None)
def trainsim_unusable():
    """Why the trainsim binary cannot be used ("" when it can); printed once."""
    path = os.environ.get("TRAINSIM", "")
    reason = ("$TRAINSIM is not set" if not path else
              f"$TRAINSIM={path} is not an executable file" if not (os.path.isfile(path) and os.access(path, os.X_OK))
              else "")
    if reason:
        print(f"\nanalysis tests: skipping the tests on real trainsim outputs: {reason}", file=sys.stderr)
    return reason


@functools.lru_cache(maxsize=None)
def trainsim_output(*args, name):
    """Runs `$TRAINSIM args... --json FILE --quiet` once per process; the path
    of FILE (named `name`, in the output folder)."""
    reason = trainsim_unusable()
    if reason:
        raise unittest.SkipTest(reason)
    out = os.path.join(_OUTPUTS.name, name)
    argv = [os.environ["TRAINSIM"], *args, "--json", out, "--quiet"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}")
    return out


def output_path(name):
    """A path in the shared output folder (for --trace)."""
    return os.path.join(_OUTPUTS.name, name)


class FigureTest(unittest.TestCase):
    """Renders figures into a per-test temp dir and checks the PNG is written."""

    def setUp(self):
        self._dir = tempfile.TemporaryDirectory(prefix="trainsim-plot-")
        self.addCleanup(self._dir.cleanup)

    def render(self, fig, name="figure.png"):
        """Saves `fig` as a PNG, asserts it is a non-empty PNG file and returns its first Axes."""
        path = os.path.join(self._dir.name, name)
        fig.savefig(path)
        plt.close(fig)
        with open(path, "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n", path)
        self.assertGreater(os.path.getsize(path), 1000)
        return fig.axes[0]

    def out(self, name):
        return os.path.join(self._dir.name, name)


# Real outputs shared by the loader and plot tests (each made once per process).
def real_prediction():
    return trainsim_output("predict", "--model", "fmnist-mlp", "--cluster", "p40x4-pcie3", "--method", "both",
                           name="prediction.json")


def real_gpipe_trace():
    """Path of the trace of 4 gpipe iterations of fmnist-mlp on 4 P40s."""
    trace = output_path("gpipe_trace.json")
    trainsim_output("simulate", "--model", "fmnist-mlp", "--cluster", "p40x4-pcie3", "--strategy", "gpipe",
                    "--iterations", "4", "--trace", trace, name="gpipe_simulation.json")
    return trace


def real_simulation(strategy="dp-ring", straggler=None, seed=1):
    args = ["simulate", "--model", "fmnist-mlp", "--cluster", "p40x4-pcie3", "--strategy", strategy,
            "--iterations", "8", "--seed", str(seed)] + (["--straggler", straggler] if straggler else [])
    return trainsim_output(*args, name=f"{strategy}_{straggler or 'clean'}_{seed}.json".replace(":", "_"))


def real_chunking():
    return trainsim_output("chunk", "--model", "fmnist-mlp", "--cluster", "p100x4-nvlink-power8", "--method",
                           "uniform", name="chunking.json")
