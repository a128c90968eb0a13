"""`trainsim report` on fmnist-mlp and four P40s: the folder holds the JSON it
was drawn from and a self-contained index.html, which headless Chromium
renders to a non-blank screenshot with every figure decoded.

Needs $TRAINSIM (the built binary; ctest sets it) and, for the browser tests,
a Chromium binary (Debian package chromium); each is skipped with a printed
reason when missing.
"""
import base64
import functools
import html
import html.parser
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

import matplotlib.image
import numpy as np

from tests.report import browser

MODEL, CLUSTER, BATCH = "fmnist-mlp", "p40x4-pcie3", 32
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_OUTPUTS = tempfile.TemporaryDirectory(prefix="trainsim-report-")


@functools.lru_cache(maxsize=None)
def missing(what):
    """Why `what` ("trainsim" or "chromium") cannot be used, "" when it can;
    printed once per process."""
    if what == "trainsim":
        path = os.environ.get("TRAINSIM", "")
        reason = ("$TRAINSIM is not set" if not path else
                  f"$TRAINSIM={path} is not an executable file" if not (os.path.isfile(path) and
                                                                       os.access(path, os.X_OK)) else "")
    else:
        reason = "" if browser.find_chromium() else (
            f"no Chromium binary ({', '.join(browser.CHROMIUM_NAMES)} on PATH, or $CHROMIUM)")
    if reason:
        print(f"\nreport tests: skipping the tests that need {what}: {reason}", file=sys.stderr)
    return reason


def require(what):
    if missing(what):
        raise unittest.SkipTest(missing(what))


@functools.lru_cache(maxsize=None)
def report_dir():
    """Runs `$TRAINSIM report` once per process; the --out folder."""
    require("trainsim")
    trainsim = os.environ["TRAINSIM"]
    out = os.path.join(_OUTPUTS.name, "report")
    argv = [trainsim, "report", "--model", MODEL, "--cluster", CLUSTER, "--batch", str(BATCH), "--out", out,
            "--quiet"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}")
    return out


def chromium():
    require("chromium")
    return browser.find_chromium()


def read_json(name):
    with open(os.path.join(report_dir(), name), encoding="utf-8") as f:
        return json.load(f)


def page_text():
    with open(os.path.join(report_dir(), "index.html"), encoding="utf-8") as f:
        return f.read()


class Tags(html.parser.HTMLParser):
    """Every start tag of a page, as (tag, {attribute: value})."""

    def __init__(self, text):
        super().__init__()
        self.tags = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def of(self, tag):
        return [attrs for t, attrs in self.tags if t == tag]


class ReportFolder(unittest.TestCase):
    """What the command leaves in --out, read as files."""

    def test_writes_prediction_choice_and_the_top_strategies_traces(self):
        prediction, choice = read_json("prediction.json"), read_json("choice.json")
        self.assertEqual(prediction["format"], "trainsim.prediction/1")
        self.assertEqual(choice["format"], "trainsim.choice/1")
        self.assertEqual((choice["model"], choice["cluster"], choice["batch_size"]), (MODEL, CLUSTER, BATCH))
        # --method both: one analytic and one simulated result per strategy ranked by choose
        methods = {(r["strategy"], r["method"]) for r in prediction["results"]}
        strategies = [e["strategy"] for e in choice["ranked"]]
        self.assertEqual(methods, {(s, m) for s in strategies for m in ("analytic", "simulated")})
        # traces of the (up to) three best feasible strategies, and of no other
        top = [e["strategy"] for e in choice["ranked"] if e["feasible"]][:3]
        traces = sorted(f for f in os.listdir(report_dir()) if f.startswith("trace-"))
        self.assertEqual(traces, sorted(f"trace-{s}.json" for s in top))
        events = read_json(f"trace-{top[0]}.json")["traceEvents"]
        self.assertTrue(any(e.get("ph") == "X" for e in events))


class ReportPage(unittest.TestCase):
    """index.html as text: self-contained, with the tables and figures."""

    def test_fetches_nothing_over_the_network(self):
        text = page_text()
        for attrs in (a for _, a in Tags(text).tags):
            for key in ("src", "href"):
                self.assertNotRegex(attrs.get(key, ""), r"^\s*(https?:)?//", key)
        self.assertNotRegex(text, r"url\(\s*['\"]?(https?:)?//")

    def test_has_at_least_three_figures_as_inline_pngs_with_alt_text_and_ids(self):
        images = Tags(page_text()).of("img")
        # speedup bars, analytic and simulated breakdowns, the winner's timeline
        self.assertGreaterEqual(len(images), 3)
        ids = [img.get("id") for img in images]
        self.assertEqual(len(set(ids)), len(ids))
        self.assertIn("fig-timeline", ids)
        for img in images:
            self.assertTrue(img.get("id"), img.get("alt"))
            self.assertTrue(img.get("alt", "").strip(), img["id"])
            prefix = "data:image/png;base64,"
            self.assertTrue(img["src"].startswith(prefix), img["id"])
            self.assertEqual(base64.b64decode(img["src"][len(prefix):])[:8], PNG_SIGNATURE, img["id"])

    def test_names_the_inputs_ranks_every_strategy_and_says_why_the_winner_wins(self):
        text = page_text()
        choice = read_json("choice.json")
        title = re.search(r"<h1>(.*?)</h1>", text).group(1)
        self.assertIn(MODEL, title)
        self.assertIn(CLUSTER, title)
        self.assertIn(f"batch {BATCH} per device", text)
        self.assertRegex(text, r"inputs written \d{4}-\d\d-\d\d \d\d:\d\d UTC")
        self.assertIn(html.escape(choice["why"]), text)
        ranking = text.split("</table>")[0]
        for entry in choice["ranked"]:
            self.assertIn(f"<td>{entry['strategy']}</td>", ranking)


class ReportScript(unittest.TestCase):
    """analysis/report.py on its own: bad input is one error line and status 2,
    which trainsim report passes on as its own error."""

    def test_a_folder_without_the_json_is_exit_2_with_one_line_naming_the_file(self):
        with tempfile.TemporaryDirectory(prefix="trainsim-report-empty-") as empty:
            done = subprocess.run([sys.executable, "-m", "analysis.report", empty], capture_output=True, text=True,
                                  timeout=60, cwd=REPO_ROOT)
            self.assertFalse(os.path.exists(os.path.join(empty, "index.html")))
        self.assertEqual(done.returncode, 2, done.stderr)
        lines = done.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, done.stderr)
        self.assertRegex(lines[0], r"^error: .*prediction\.json: does not exist \(")


class ReportInBrowser(unittest.TestCase):
    """index.html rendered by headless Chromium."""

    def setUp(self):
        self.chromium = chromium()
        self.page = os.path.join(report_dir(), "index.html")
        self.work = tempfile.TemporaryDirectory(prefix="trainsim-browser-")
        self.addCleanup(self.work.cleanup)

    def images_loaded(self, page):
        """(images the browser decoded, as the page's load script counts them; <img> tags)."""
        dom = browser.dump_dom(self.chromium, page)
        body = Tags(dom).of("body")[0]
        self.assertIn("data-images-loaded", body, "the page's load script did not run")
        with open(page, encoding="utf-8") as f:
            return int(body["data-images-loaded"]), len(Tags(f.read()).of("img"))

    def test_screenshot_is_a_png_that_is_not_blank_and_shows_the_coloured_figures(self):
        png = os.path.join(self.work.name, "report.png")
        browser.screenshot(self.chromium, self.page, png)
        with open(png, "rb") as f:
            self.assertEqual(f.read(8), PNG_SIGNATURE)
        pixels = matplotlib.image.imread(png)[..., :3]  # floats in [0, 1]
        self.assertEqual(pixels.shape[:2], (3000, 1200))
        self.assertGreater(float(pixels.std()), 0)
        # Text and table rules are grey; the figures' bars are saturated
        # colours (tab:blue is (31, 119, 180): max - min = 149/255 = 0.58).
        # One bar of 20 x 50 pixels is 1000; four figures hold far more.
        saturated = int(np.count_nonzero(pixels.max(axis=2) - pixels.min(axis=2) > 0.3))
        self.assertGreater(saturated, 5000)

    def test_every_figure_decodes_in_the_browser(self):
        loaded, images = self.images_loaded(self.page)
        self.assertGreaterEqual(images, 3)
        self.assertEqual(loaded, images)

    def test_a_figure_that_does_not_decode_is_not_counted(self):
        # The check above can fail: the same page with its first figure's
        # data cut to 4 bytes has one figure fewer decoded.
        broken = os.path.join(self.work.name, "broken.html")
        with open(broken, "w", encoding="utf-8") as f:
            f.write(re.sub(r'src="data:image/png;base64,[^"]*"', 'src="data:image/png;base64,AAAA"', page_text(),
                           count=1))
        loaded, images = self.images_loaded(broken)
        self.assertEqual(loaded, images - 1)


if __name__ == "__main__":
    unittest.main()


class RankingTable(unittest.TestCase):
    """The page's ranking shows trainsim's ranks and ties; it re-ranks nothing."""

    @staticmethod
    def entry(strategy, rank, tied, samples_per_s, feasible=True):
        prediction = {"iteration_s": 0.25, "samples_per_iteration": 64, "samples_per_s": samples_per_s,
                      "speedup_vs_single": 4.0, "staleness": 1 if strategy == "pipesgd" else 0,
                      "memory_bytes_per_device": [8e9]}
        return {"strategy": strategy, "rank": rank, "tied": tied, "feasible": feasible, "reason": "",
                "settings": {}, "prediction": prediction}

    def test_a_tie_shows_its_shared_rank_and_the_rule_in_the_given_order(self):
        from analysis import report
        choice = {"tie_rule": "=: a tie, samples/s within 1%", "ranked": [
            self.entry("dp-overlap", 1, True, 270.0), self.entry("pipesgd", 1, True, 270.1),
            self.entry("dp-ring", 3, False, 250.8), self.entry("single", 0, False, 67.5, feasible=False)]}
        page = report.ranking_table(choice)
        cells = re.findall(r"<td[^>]*>(.*?)</td>", page)
        self.assertEqual([cells[i] for i in range(0, len(cells), 11)], ["1=", "1=", "3", "-"])
        self.assertLess(page.index("<td>dp-overlap</td>"), page.index("<td>pipesgd</td>"))
        self.assertIn("<th>samples/iter</th><th>time/iter</th>", page)
        self.assertIn(html.escape(choice["tie_rule"]), page)
        without_tie = {"tie_rule": choice["tie_rule"], "ranked": [self.entry("dp-ring", 1, False, 250.8)]}
        self.assertNotIn("a tie", report.ranking_table(without_tie))
