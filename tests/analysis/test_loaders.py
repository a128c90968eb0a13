"""Loaders of analysis/plots/common.py on hand-made files (tests/analysis/data)
and on outputs of the real trainsim binary."""
import json
import math
import os
import tempfile
import unittest

from analysis.plots import common
from tests.analysis import support


def write(directory, name, content):
    path = os.path.join(directory, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(content if isinstance(content, str) else json.dumps(content))
    return path


class HandMadeFiles(unittest.TestCase):
    def test_prediction_keeps_results_and_splits_them_by_method(self):
        p = common.load_prediction(support.data("prediction.json"))
        self.assertEqual(list(common.prediction_results(p, "analytic")), ["single", "dp-ring", "gpipe"])
        self.assertEqual(common.prediction_results(p, "simulated")["gpipe"]["iteration_s"], 0.021)

    def test_trace_converts_microseconds_to_seconds_and_names_lanes(self):
        t = common.load_trace(support.data("trace.json"))
        self.assertEqual(len(t.events), 5)
        first = t.events[0]
        # ts 0 us, dur 1000 us -> start 0 s, 0.001 s long
        self.assertEqual((first.worker, first.stream, first.op), (0, 0, "forward"))
        self.assertAlmostEqual(first.duration_s, 1e-3)
        self.assertAlmostEqual(t.events[-1].start_s, 4.5e-3)  # ts 4500 us
        # 5 declared streams; worker 1's recv holds no event but is still a lane
        self.assertEqual(t.lanes(), [(0, 0), (0, 1), (1, 0), (1, 1), (1, 2)])
        self.assertEqual(t.lane_label((1, 2)), "w1 recv")

    def test_run_reads_times_and_losses(self):
        run = common.load_run(support.data("run.json"))
        self.assertEqual(run["iteration_s"], 0.0123)
        self.assertEqual(run["samples_per_s"], 5203.3)
        self.assertEqual(run["loss_per_iteration"], [2.30, 1.80, 1.40, 1.25])

    def test_validation_computes_missing_relative_errors(self):
        v = common.load_validation(support.data("validation.json"))
        by_strategy = {r["strategy"]: r for r in v["results"]}
        # given in the file: kept
        self.assertEqual(by_strategy["dp-ring"]["error_analytic"], 0.04)
        # gpipe: (0.180 - 0.200) / 0.200 = -0.10 and (0.210 - 0.200) / 0.200 = +0.05
        self.assertAlmostEqual(by_strategy["gpipe"]["error_analytic"], -0.10)
        self.assertAlmostEqual(by_strategy["gpipe"]["error_simulated"], 0.05)
        # dualpipe has no simulated prediction: no simulated error
        self.assertNotIn("error_simulated", by_strategy["dualpipe"])

    def test_metrics_reads_columns_with_empty_cells_as_nan(self):
        m = common.load_metrics(support.data("metrics_a.csv"))
        self.assertEqual(m["iteration"], [0, 1, 2, 3])
        self.assertEqual(m["loss"], [2.30, 1.90, 1.50, 1.20])
        self.assertTrue(math.isnan(m["test_accuracy"][0]))
        self.assertEqual(m["test_accuracy"][2], 0.61)

    def test_run_labels_add_the_model_then_a_number_where_strategies_repeat(self):
        outputs = [{"model": "a", "strategy": "gpipe"}, {"model": "b", "strategy": "gpipe"},
                   {"model": "b", "strategy": "gpipe"}, {"model": "b", "strategy": "dsp"}]
        self.assertEqual(common.run_labels(outputs), ["a gpipe", "b gpipe #1", "b gpipe #2", "b dsp"])


class BadInput(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def assert_error(self, load, content, *fragments):
        path = write(self.dir.name, "bad.json", content)
        with self.assertRaises(common.FormatError) as caught:
            load(path)
        for fragment in fragments:
            self.assertIn(fragment, str(caught.exception))

    def test_wrong_format_names_the_expected_one(self):
        self.assert_error(common.load_prediction, {"format": "trainsim.profile/1"}, "format", "trainsim.prediction/1")

    def test_not_json_names_the_file(self):
        self.assert_error(common.load_run, "{oops", "bad.json", "is not JSON")

    def test_missing_field_names_the_result_and_field(self):
        self.assert_error(common.load_prediction,
                          {"format": "trainsim.prediction/1", "results": [{"strategy": "gpipe", "samples_per_s": 1}]},
                          "results[0]: iteration_s", "is missing")

    def test_validation_without_any_prediction_is_refused(self):
        self.assert_error(common.load_validation,
                          {"format": "trainsim.validation/1", "results": [{"strategy": "gpipe", "measured_s": 1.0}]},
                          "has no prediction", "predicted_analytic_s")

    def test_zero_measured_time_is_refused(self):
        self.assert_error(common.load_validation,
                          {"format": "trainsim.validation/1",
                           "results": [{"strategy": "gpipe", "measured_s": 0, "predicted_analytic_s": 1.0}]},
                          "measured_s", "a positive time")

    def test_non_numeric_loss_names_the_entry(self):
        self.assert_error(common.load_run, {"format": "trainsim.run/1", "iteration_s": 1, "samples_per_s": 1,
                                            "loss_per_iteration": [1.0, "nan?"]}, "loss_per_iteration[1]")

    def test_trace_without_complete_events_is_refused(self):
        self.assert_error(common.load_trace, {"traceEvents": [{"ph": "M", "name": "process_name", "pid": 0}]},
                          "no complete")

    def test_trace_event_with_a_non_integer_worker_is_refused(self):
        self.assert_error(common.load_trace, {"traceEvents": [{"ph": "X", "pid": "w0", "ts": 0, "dur": 1}]},
                          "traceEvents[0]: pid", "an integer")

    def test_metrics_cell_that_is_not_a_number_names_line_and_column(self):
        path = write(self.dir.name, "m.csv", "iteration,loss\n0,2.3\n1,abc\n")
        with self.assertRaises(common.FormatError) as caught:
            common.load_metrics(path)
        self.assertIn("m.csv:3: loss", str(caught.exception))

    def test_metrics_without_loss_column_is_refused(self):
        path = write(self.dir.name, "m.csv", "iteration,accuracy\n0,0.5\n")
        with self.assertRaisesRegex(common.FormatError, "no column 'loss'"):
            common.load_metrics(path)


class RealOutputs(unittest.TestCase):
    """The loaders accept what the trainsim binary writes."""

    def test_prediction_of_both_methods(self):
        p = common.load_prediction(support.real_prediction())
        analytic, simulated = common.prediction_results(p, "analytic"), common.prediction_results(p, "simulated")
        self.assertIn("single", analytic)
        self.assertEqual(list(analytic), list(simulated))
        self.assertEqual(analytic["single"]["speedup_vs_single"], 1.0)

    def test_trace_has_a_lane_per_worker_stream(self):
        t = common.load_trace(support.real_gpipe_trace())
        # gpipe on 4 devices: compute, send and recv streams on each worker
        self.assertEqual(len(t.lanes()), 12)
        self.assertLessEqual({"forward", "backward", "send", "recv"}, {e.op for e in t.events})
        self.assertTrue(all(e.duration_s >= 0 for e in t.events))

    def test_simulation_and_chunking(self):
        sim = common.load_simulation(support.real_simulation())
        self.assertEqual(len(sim["workers"]), 4)
        self.assertEqual(sim["straggler"]["slowdown"], 1.0)
        chunking = common.load_chunking(support.real_chunking())
        self.assertIn(chunking["chunk_size"], [p["chunk_size"] for p in chunking["curve"]])


if __name__ == "__main__":
    unittest.main()
