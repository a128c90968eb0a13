"""The error summary (analysis/plots/errors.py) on hand-computed validations."""
import os
import subprocess
import sys
import unittest

from analysis.plots import errors
from tests.analysis import support

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class ErrorSummary(unittest.TestCase):
    def test_overall_median_worst_and_bias_of_one_validation(self):
        s = errors.summarize_errors(support.data("validation.json"))
        analytic = s["overall"]["analytic"]
        # analytic errors: dp-ring +0.04 (given), gpipe (0.180-0.200)/0.200 = -0.10,
        # dualpipe (0.0515-0.050)/0.050 = +0.03
        # median |e| of {0.04, 0.10, 0.03} = 0.04; worst = -0.10; bias = (0.04-0.10+0.03)/3 = -0.01
        self.assertEqual(analytic.count, 3)
        self.assertAlmostEqual(analytic.median_abs, 0.04)
        self.assertAlmostEqual(analytic.worst, -0.10)
        self.assertAlmostEqual(analytic.bias, -0.01)
        simulated = s["overall"]["simulated"]
        # simulated: dp-ring -0.02 (given), gpipe (0.210-0.200)/0.200 = +0.05; dualpipe has none
        # median |e| = (0.02+0.05)/2 = 0.035; worst = +0.05; bias = (-0.02+0.05)/2 = 0.015
        self.assertEqual(simulated.count, 2)
        self.assertAlmostEqual(simulated.median_abs, 0.035)
        self.assertAlmostEqual(simulated.worst, 0.05)
        self.assertAlmostEqual(simulated.bias, 0.015)

    def test_strategies_come_first_in_file_order_and_overall_last(self):
        s = errors.summarize_errors(support.data("validation.json"))
        self.assertEqual(list(s), ["dp-ring", "gpipe", "dualpipe", "overall"])
        self.assertEqual(list(s["dualpipe"]), ["analytic"])

    def test_per_strategy_statistics_pool_several_validations(self):
        s = errors.summarize_errors([support.data("validation.json"), support.data("validation_second.json")])
        ring = s["dp-ring"]["analytic"]
        # dp-ring analytic: +0.04 (first file) and (0.470-0.500)/0.500 = -0.06 (second)
        # median |e| = (0.04+0.06)/2 = 0.05; worst = -0.06; bias = (0.04-0.06)/2 = -0.01
        self.assertEqual(ring.count, 2)
        self.assertAlmostEqual(ring.median_abs, 0.05)
        self.assertAlmostEqual(ring.worst, -0.06)
        self.assertAlmostEqual(ring.bias, -0.01)
        self.assertEqual(s["overall"]["analytic"].count, 4)

    def test_table_prints_percentages_with_signs(self):
        table = errors.error_table(errors.summarize_errors(support.data("validation.json")))
        rows = {tuple(line.split()[:2]): line.split()[2:] for line in table.splitlines()[2:]}
        # gpipe analytic: one error of -10%: median |e| 10.0%, worst -10.0%, bias -10.0%
        self.assertEqual(rows[("gpipe", "analytic")], ["1", "10.0%", "-10.0%", "-10.0%"])
        # overall simulated from the first test: 3.5%, +5.0%, +1.5%
        self.assertEqual(rows[("overall", "simulated")], ["2", "3.5%", "+5.0%", "+1.5%"])


class ErrorsCommandLine(unittest.TestCase):
    def run_cli(self, *args):
        return subprocess.run([sys.executable, "-m", "analysis.plots.errors", *args], cwd=ROOT,
                              capture_output=True, text=True, timeout=60)

    def test_prints_the_table(self):
        done = self.run_cli(support.data("validation.json"))
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("median |error|", done.stdout)
        # header and rule, then one row per (group, method): dp-ring 2, gpipe 2, dualpipe 1, overall 2
        self.assertEqual(len(done.stdout.splitlines()), 2 + 7)

    def test_bad_input_exits_2_with_one_error_line(self):
        done = self.run_cli(support.data("prediction.json"))
        self.assertEqual(done.returncode, 2)
        self.assertEqual(done.stderr.count("\n"), 1)
        self.assertIn("format", done.stderr)
        self.assertIn("trainsim.validation/1", done.stderr)


if __name__ == "__main__":
    unittest.main()
