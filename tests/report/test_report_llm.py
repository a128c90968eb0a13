"""`trainsim report` for a transformer (megatron-1.7b on 32 A100s): the page
shows the 3-D search's ranking, each way of spreading the model beside its
simulated job, the search's why, and three inline figures that decode in
headless Chromium; report_llm.py's pieces on hand-made inputs.

Needs $TRAINSIM (ctest sets it) and, for the browser test, Chromium; each is
skipped with the reason when missing.
"""
import base64
import functools
import html
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

from analysis import report_llm
from analysis.plots import common
from tests.report import test_report_browser as base

MODEL, MACHINE, GPUS, GLOBAL_BATCH = "megatron-1.7b", "dgx-a100", 32, 512
_OUTPUTS = tempfile.TemporaryDirectory(prefix="trainsim-report-llm-")


@functools.lru_cache(maxsize=None)
def report_dir():
    base.require("trainsim")
    out = os.path.join(_OUTPUTS.name, "report")
    argv = [os.environ["TRAINSIM"], "report", "--model", MODEL, "--cluster", MACHINE, "--gpus", str(GPUS),
            "--global-batch", str(GLOBAL_BATCH), "--out", out, "--quiet"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}")
    return out


def read(name):
    with open(os.path.join(report_dir(), name), encoding="utf-8") as f:
        return f.read()


class TransformerPage(unittest.TestCase):
    def test_ranks_the_search_shows_every_family_and_says_why(self):
        page, choice = read("index.html"), json.loads(read("choice.json"))
        prediction = json.loads(read("prediction.json"))
        title = re.search(r"<h1>(.*?)</h1>", page).group(1)
        self.assertIn(MODEL, title)
        self.assertIn(f"{GPUS} GPUs of {MACHINE}", title)
        self.assertIn(html.escape(choice["why"]), page)
        ranking, families = page.split("</table>")[:2]
        self.assertEqual(ranking.count("<tr>") - 1, len(choice["ranked"]))  # a row each, and the header
        for f in prediction["families"]:
            self.assertIn(f"<td>{f['family']}</td>", families)
            self.assertIn(report_llm.settings_text(f["training"]), families)
        self.assertIn("the whole job", families)

    def test_has_the_iteration_memory_and_timeline_figures_as_inline_pngs(self):
        images = base.Tags(read("index.html")).of("img")
        self.assertEqual([img["id"] for img in images], ["fig-iteration", "fig-memory", "fig-timeline"])
        for img in images:
            self.assertTrue(img.get("alt", "").strip(), img["id"])
            data = img["src"][len("data:image/png;base64,"):]
            self.assertEqual(base64.b64decode(data)[:8], base.PNG_SIGNATURE, img["id"])

    def test_every_figure_decodes_in_the_browser(self):
        chromium = base.chromium()
        dom = base.browser.dump_dom(chromium, os.path.join(report_dir(), "index.html"))
        body = base.Tags(dom).of("body")[0]
        self.assertEqual(body.get("data-images-loaded"), "3")


class Pieces(unittest.TestCase):
    """report_llm on hand-made inputs."""

    @staticmethod
    def event(worker, iteration):
        return common.TraceEvent(worker, 0, "forward", "forward", 0.0, 1.0, {"iteration": iteration})

    def test_a_whole_jobs_trace_keeps_the_first_gpu_of_each_stage(self):
        # t = 2, p = 2, d = 2: worker (k·d + e)·t + q, so stage 1 starts at 4.
        trace = common.Trace(events=[self.event(w, 0) for w in range(8)], worker_names={w: f"w{w}" for w in range(8)})
        kept = report_llm.stage_firsts(trace, {"tp": 2, "pp": 2, "dp": 2})
        self.assertEqual(sorted({e.worker for e in kept.events}), [0, 4])
        self.assertEqual(sorted(kept.worker_names), [0, 4])

    def test_the_middle_iteration_is_drawn(self):
        trace = common.Trace(events=[self.event(0, i) for i in (0, 1, 2)])
        self.assertEqual(report_llm.middle_iteration(trace), (1, 1))
        self.assertEqual(report_llm.middle_iteration(common.Trace(events=[])), (0, 0))

    def test_an_iteration_splits_into_its_parts(self):
        step = {"pipeline_s": 10.0, "bubble_s": 1.0, "tensor_parallel_s": 2.0, "sharding_s": 0.5,
                "data_parallel_s": 0.25, "optimizer_s": 0.125}
        self.assertEqual(report_llm.iteration_parts(step), (6.5, 1.0, 2.0, 0.5, 0.25, 0.125))

    def test_a_choice_of_another_format_is_one_error_naming_the_field(self):
        with tempfile.TemporaryDirectory(prefix="trainsim-report-llm-bad-") as folder:
            with open(os.path.join(folder, "prediction.json"), "w", encoding="utf-8") as f:
                json.dump({"format": "trainsim.llm-prediction/1", "model": MODEL, "machine": MACHINE, "gpus": 8,
                           "global_batch": 8, "families": [{"family": "zero-1"}]}, f)
            with open(os.path.join(folder, "choice.json"), "w", encoding="utf-8") as f:
                json.dump({"format": "trainsim.llm-choice/1", "ranked": []}, f)
            done = subprocess.run([sys.executable, "-m", "analysis.report", folder], capture_output=True, text=True,
                                  timeout=60, cwd=base.REPO_ROOT)
        self.assertEqual(done.returncode, 2, done.stderr)
        lines = done.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, done.stderr)
        self.assertRegex(lines[0], r"^error: .*prediction\.json: families\[0\]: training: is missing")


if __name__ == "__main__":
    unittest.main()
