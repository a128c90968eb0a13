"""Every figure of analysis/plots renders to a PNG with the bars, lanes and
lines its data calls for, from hand-made data and from real trainsim outputs,
through the functions and through the command lines."""
import json
import os

import matplotlib.colors

from analysis.plots import breakdown, chunk, common, convergence, scatter, speedup, straggler, timeline
from tests.analysis import support


def simulation(strategy, iteration_s, probability=0.0, slowdown=1.0, seed=1, workers=None):
    """A hand-made trainsim.simulation/1 dict."""
    zero = {p: 0.0 for p in common.BREAKDOWN_PARTS}
    return {"format": "trainsim.simulation/1", "model": "toy", "cluster": "p40x4-pcie3", "strategy": strategy,
            "config": {}, "seed": seed, "iteration_s": iteration_s,
            "straggler": {"probability": probability, "slowdown": slowdown},
            "workers": workers or [{"breakdown_s": dict(zero, compute=iteration_s)}]}


def bar_heights(ax):
    return [round(p.get_height(), 9) for p in ax.patches]


def tick_labels(ax, axis="x"):
    return [t.get_text() for t in (ax.get_xticklabels() if axis == "x" else ax.get_yticklabels())]


class SpeedupBars(support.FigureTest):
    def test_one_bar_per_analytic_strategy_of_a_prediction(self):
        ax = self.render(speedup.plot_speedup(support.data("prediction.json")))
        # prediction.json: analytic speedup_vs_single 1.0, 3.2, 2.0
        self.assertEqual(bar_heights(ax), [1.0, 3.2, 2.0])
        self.assertEqual(tick_labels(ax), ["single", "dp-ring", "gpipe"])

    def test_paper_values_add_a_second_series_and_their_own_labels(self):
        fig = speedup.plot_speedup(support.data("prediction.json"), paper={"dp-ring": 3.5, "pipedream": 1.7},
                                   paper_label="seed 000")
        ax = self.render(fig)
        # 3 trainsim bars, then the paper's 2 (dp-ring, pipedream)
        self.assertEqual(bar_heights(ax), [1.0, 3.2, 2.0, 3.5, 1.7])
        self.assertEqual(tick_labels(ax), ["single", "dp-ring", "gpipe", "pipedream"])
        self.assertEqual([t.get_text() for t in ax.get_legend().get_texts()], ["trainsim", "seed 000"])
        # the paper's dp-ring bar stands right of trainsim's, both centred on tick 1 (width 0.4)
        self.assertAlmostEqual(ax.patches[1].get_x(), 1 - 0.4)
        self.assertAlmostEqual(ax.patches[3].get_x(), 1.0)

    def test_metric_and_method_pick_the_values(self):
        fig = speedup.plot_speedup(support.data("prediction.json"), metric="samples_per_s", method="simulated")
        ax = self.render(fig)
        self.assertEqual(bar_heights(ax), [1523.8])  # gpipe is the only simulated result
        self.assertEqual(ax.get_ylabel(), "samples / s")

    def test_real_prediction(self):
        p = common.load_prediction(support.real_prediction())
        ax = self.render(speedup.plot_speedup(p))
        self.assertEqual(tick_labels(ax), list(common.prediction_results(p, "analytic")))


class GroupedBars(support.FigureTest):
    GROUPS = {"vgg16": {"dp": 2.0, "dualpipe": 3.0}, "snn": {"dualpipe": 4.0}}

    def test_a_bar_per_group_and_series_with_a_missing_slot_left_empty(self):
        ax = self.render(speedup.plot_grouped_bars(self.GROUPS, reference=1.0))
        # series in order of first appearance: dp (vgg16 only), then dualpipe (vgg16, snn)
        self.assertEqual(bar_heights(ax), [2.0, 3.0, 4.0])
        self.assertEqual(tick_labels(ax), ["vgg16", "snn"])
        self.assertEqual([t.get_text() for t in ax.get_legend().get_texts()], ["dp", "dualpipe"])
        # two series of width 0.4 centred 0.2 either side of each tick; left edges:
        # dp centred at -0.2 -> -0.4, dualpipe centred at 0.2 and 1.2 -> 0.0 and 1.0
        self.assertEqual([round(p.get_x(), 9) for p in ax.patches], [-0.4, 0.0, 1.0])
        self.assertEqual(len(ax.lines), 1)  # the reference line

    def test_log_axis_and_empty_or_bad_values_refused(self):
        ax = self.render(speedup.plot_grouped_bars(self.GROUPS, ylabel="samples / s", log=True))
        self.assertEqual((ax.get_yscale(), ax.get_ylabel()), ("log", "samples / s"))
        with self.assertRaises(common.FormatError):
            speedup.plot_grouped_bars({})
        with self.assertRaisesRegex(common.FormatError, "snn: dp"):
            speedup.plot_grouped_bars({"snn": {"dp": float("nan")}})


class Timeline(support.FigureTest):
    LANES = ["w0 compute", "w0 send", "w1 compute", "w1 send", "w1 recv"]

    def test_a_lane_per_worker_stream_and_a_bar_set_per_lane_and_kind(self):
        ax = self.render(timeline.plot_timeline(support.data("trace.json")))
        self.assertEqual(tick_labels(ax, "y"), self.LANES)
        # lanes with ops: w0 compute {forward}, w0 send {send}, w1 compute {forward, backward}, w1 send {send}
        self.assertEqual(len(ax.collections), 5)
        self.assertEqual([t.get_text() for t in ax.get_legend().get_texts()], ["forward", "backward", "send"])

    def test_bars_sit_at_their_times_in_ms(self):
        ax = self.render(timeline.plot_timeline(support.data("trace.json")))
        colour = list(matplotlib.colors.to_rgba(timeline.KIND_COLOURS["backward"]))
        backward = [c for c in ax.collections if c.get_facecolor()[0].tolist() == colour]
        self.assertEqual(len(backward), 1)
        xs = backward[0].get_paths()[0].vertices[:, 0]
        # w1 backward: ts 2500 us, dur 2000 us after the first op at 0 -> 2.5 .. 4.5 ms
        self.assertAlmostEqual(xs.min(), 2.5)
        self.assertAlmostEqual(xs.max(), 4.5)

    def test_iterations_limit_the_ops_but_keep_the_lanes(self):
        ax = self.render(timeline.plot_timeline(support.data("trace.json"), iterations=(0, 0)))
        self.assertEqual(tick_labels(ax, "y"), self.LANES)
        self.assertEqual(len(ax.collections), 4)  # w1's send belongs to iteration 1

    def test_measured_trace_goes_below_the_predicted(self):
        path = support.data("trace.json")
        ax = self.render(timeline.plot_timeline(path, measured=path))
        labels = tick_labels(ax, "y")
        self.assertEqual(labels, [f"{which} {lane}" for which in ("predicted", "measured") for lane in self.LANES])
        self.assertEqual(len(ax.collections), 10)
        self.assertGreater(ax.get_ylim()[0], ax.get_ylim()[1])  # row 0 at the top

    def test_iterations_that_select_nothing_are_refused(self):
        with self.assertRaisesRegex(common.FormatError, "selects no op"):
            timeline.plot_timeline(support.data("trace.json"), iterations=(5, 6))

    def test_real_trace(self):
        ax = self.render(timeline.plot_timeline(support.real_gpipe_trace(), iterations=(0, 1)))
        labels = tick_labels(ax, "y")
        self.assertEqual(len(labels), 12)  # 4 workers x compute, send, recv
        self.assertEqual(labels[:3], ["w0 compute", "w0 send", "w0 recv"])


class PredictedAgainstMeasured(support.FigureTest):
    def test_a_point_per_strategy_and_method_and_the_band(self):
        ax = self.render(scatter.plot_predicted_vs_measured(support.data("validation.json")))
        band, analytic, simulated = ax.collections
        self.assertEqual(len(analytic.get_offsets()), 3)
        self.assertEqual(len(simulated.get_offsets()), 2)
        # gpipe analytic at (measured 0.200, predicted 0.180)
        self.assertIn([0.200, 0.180], analytic.get_offsets().tolist())
        # the band spans y = 0.95 x .. 1.05 x: at its right end x = high, y up to 1.05 high
        ys = band.get_paths()[0].vertices[:, 1]
        xs = band.get_paths()[0].vertices[:, 0]
        self.assertAlmostEqual(ys.max(), 1.05 * xs.max())
        self.assertAlmostEqual(ys[xs > 0].min(), 0.95 * xs[xs > 0].min())
        self.assertEqual(ax.get_xscale(), "linear")  # 0.05 .. 0.21 s spans less than 20x

    def test_wide_ranges_use_log_axes(self):
        v = {"format": "trainsim.validation/1",
             "results": [{"strategy": "a", "measured_s": 0.001, "predicted_analytic_s": 0.0011},
                         {"strategy": "b", "measured_s": 1.0, "predicted_analytic_s": 0.9}]}
        ax = self.render(scatter.plot_predicted_vs_measured(v, band=0.1))
        self.assertEqual((ax.get_xscale(), ax.get_yscale()), ("log", "log"))
        self.assertEqual(len(ax.collections), 2)  # band and the analytic points


class BreakdownStacks(support.FigureTest):
    def test_four_parts_per_strategy_stacked_to_the_iteration(self):
        ax = self.render(breakdown.plot_breakdown(support.data("prediction.json")))
        self.assertEqual(len(ax.patches), 4 * 3)
        # compute bars first (single, dp-ring, gpipe): 40, 40, 10 ms
        self.assertEqual([round(p.get_height(), 9) for p in ax.patches[:3]], [40.0, 40.0, 10.0])
        # tops of the last part = iteration_s: 40, 50, 20 ms
        self.assertEqual([round(p.get_y() + p.get_height(), 9) for p in ax.patches[9:]], [40.0, 50.0, 20.0])

    def test_shares_are_percent_of_each_bar(self):
        ax = self.render(breakdown.plot_breakdown(support.data("prediction.json"), shares=True))
        gpipe = [round(p.get_height(), 9) for p in ax.patches[2::3]]
        # gpipe analytic: 10, 0, 4, 6 ms of 20 ms -> 50, 0, 20, 30 %
        self.assertEqual(gpipe, [50.0, 0.0, 20.0, 30.0])

    def test_simulation_breakdown_is_the_worker_mean_scaled_to_the_iteration(self):
        zero = {p: 0.0 for p in common.BREAKDOWN_PARTS}
        workers = [{"breakdown_s": dict(zero, compute=0.003, idle_transfer=0.001)},
                   {"breakdown_s": dict(zero, compute=0.001, idle_transfer=0.001, idle_imbalance=0.002)}]
        sim = simulation("gpipe", 0.002, workers=workers)
        # mean: compute 0.002, idle_transfer 0.001, idle_imbalance 0.001 (sum 0.004 over the window);
        # scaled by iteration_s / 0.004 = 0.5 -> 0.001, 0, 0.0005, 0.0005
        parts = breakdown.simulation_breakdown(sim)
        for part, expected in zip(common.BREAKDOWN_PARTS, (0.001, 0.0, 0.0005, 0.0005)):
            self.assertAlmostEqual(parts[part], expected)
        ax = self.render(breakdown.plot_breakdown([sim, simulation("dp-ring", 0.003)]))
        self.assertEqual(len(ax.patches), 8)
        self.assertEqual(tick_labels(ax), ["gpipe", "dp-ring"])

    def test_real_prediction(self):
        p = common.load_prediction(support.real_prediction())
        ax = self.render(breakdown.plot_breakdown(p, method="simulated"))
        self.assertEqual(len(ax.patches), 4 * len(common.prediction_results(p, "simulated")))


class ChunkCurve(support.FigureTest):
    CHUNKING = {"format": "trainsim.chunking/1", "model": "toy", "batch": 16, "method": "uniform",
                "backward_s": 0.0025, "compute_backward_s": 0.002, "chunk_size": 3,
                "curve": [{"chunk_size": s, "backward_s": t, "chunks": 4 // s}
                          for s, t in ((2, 0.003), (1, 0.004), (4, 0.0035), (3, 0.0025))]}

    def test_curve_sorted_by_size_with_the_chosen_size_marked(self):
        ax = self.render(chunk.plot_chunk_curve(self.CHUNKING))
        curve, marker, compute = ax.lines
        self.assertEqual(list(curve.get_xdata()), [1, 2, 3, 4])
        self.assertEqual([round(y, 9) for y in curve.get_ydata()], [4.0, 3.0, 2.5, 3.5])  # ms
        self.assertEqual((list(marker.get_xdata()), [round(y, 9) for y in marker.get_ydata()]), ([3], [2.5]))
        self.assertEqual(list(compute.get_ydata()), [2.0, 2.0])  # compute_backward_s 0.002 s

    def test_chosen_size_overrides_the_files(self):
        ax = self.render(chunk.plot_chunk_curve(self.CHUNKING, chosen=2, show_compute=False))
        self.assertEqual(len(ax.lines), 2)
        self.assertEqual([round(y, 9) for y in ax.lines[1].get_ydata()], [3.0])

    def test_a_size_off_the_curve_or_a_file_without_curve_is_refused(self):
        with self.assertRaisesRegex(common.FormatError, "not on the curve"):
            chunk.plot_chunk_curve(self.CHUNKING, chosen=9)
        exact = {k: v for k, v in self.CHUNKING.items() if k not in ("curve", "chunk_size")}
        with self.assertRaisesRegex(common.FormatError, "no curve or trials"):
            chunk.plot_chunk_curve(exact)

    def test_heuristic_trials_plot_the_lapse(self):
        heuristic = dict(self.CHUNKING, method="heuristic", chunk_size=2,
                         trials=[{"chunk_size": 1, "lapse_s": 0.01}, {"chunk_size": 2, "lapse_s": 0.008}])
        del heuristic["curve"]
        ax = self.render(chunk.plot_chunk_curve(heuristic))
        self.assertIn("lapse", ax.get_ylabel())
        self.assertEqual(list(ax.lines[0].get_xdata()), [1, 2])

    def test_real_chunking(self):
        c = common.load_chunking(support.real_chunking())
        ax = self.render(chunk.plot_chunk_curve(c))
        self.assertEqual(list(ax.lines[0].get_xdata()), sorted(p["chunk_size"] for p in c["curve"]))
        self.assertEqual(list(ax.lines[1].get_xdata()), [c["chunk_size"]])


class StragglerCurve(support.FigureTest):
    SIMS = [simulation("gpipe", 0.100), simulation("gpipe", 0.110, 0.33, 1.5, seed=1),
            simulation("gpipe", 0.120, 0.33, 1.5, seed=2), simulation("gpipe", 0.150, 0.33, 2.0),
            simulation("dsp", 0.200), simulation("dsp", 0.210, 0.33, 2.0)]

    def test_relative_slowdown_is_averaged_over_seeds(self):
        curves = straggler.straggler_curves(self.SIMS)
        # gpipe: x = 50%: mean(0.110, 0.120) / 0.100 - 1 = +15%; x = 100%: 0.150 / 0.100 - 1 = +50%
        self.assertEqual(list(curves), ["gpipe", "dsp"])
        self.assertEqual([(x, round(y, 9)) for x, y in curves["gpipe"]], [(0.0, 0.0), (50.0, 15.0), (100.0, 50.0)])
        # dsp: x = 100%: 0.210 / 0.200 - 1 = +5%
        self.assertEqual([(x, round(y, 9)) for x, y in curves["dsp"]], [(0.0, 0.0), (100.0, 5.0)])

    def test_one_line_per_strategy_and_paper_lines_dashed(self):
        ax = self.render(straggler.plot_straggler(self.SIMS, paper={"FR (paper)": [(20, 9.0), (50, 28.5)]}))
        self.assertEqual(len(ax.lines), 3)
        self.assertEqual([line.get_linestyle() for line in ax.lines], ["-", "-", "--"])
        self.assertEqual([t.get_text() for t in ax.get_legend().get_texts()], ["gpipe", "dsp", "FR (paper)"])

    def test_configurations_of_one_strategy_are_told_apart(self):
        sims = [dict(s, config={"queues": q}) for q in ([1, 0], [2, 0]) for s in self.SIMS[4:]]
        self.assertEqual(list(straggler.straggler_curves(sims)), ["dsp queues=[1,0]", "dsp queues=[2,0]"])

    def test_a_strategy_without_a_clean_run_is_refused(self):
        with self.assertRaisesRegex(common.FormatError, "no run without stragglers"):
            straggler.straggler_curves(self.SIMS[1:4])

    def test_real_simulations(self):
        sims = [support.real_simulation("dp-ring"), support.real_simulation("dp-ring", "0.5:2.0")]
        ax = self.render(straggler.plot_straggler(sims))
        self.assertEqual(len(ax.lines), 1)
        self.assertEqual(list(ax.lines[0].get_xdata()), [0.0, 100.0])


class ConvergenceCurves(support.FigureTest):
    def test_one_line_per_metrics_file_labelled_by_name(self):
        ax = self.render(convergence.plot_convergence([support.data("metrics_a.csv"), support.data("metrics_b.csv")]))
        self.assertEqual(len(ax.lines), 2)
        self.assertEqual(list(ax.lines[0].get_ydata()), [2.30, 1.90, 1.50, 1.20])
        self.assertEqual([t.get_text() for t in ax.get_legend().get_texts()], ["metrics_a", "metrics_b"])

    def test_empty_cells_are_left_out(self):
        ax = self.render(convergence.plot_convergence({"a": support.data("metrics_a.csv")}, column="test_accuracy"))
        # metrics_a.csv has test_accuracy only at iteration 2
        self.assertEqual((list(ax.lines[0].get_xdata()), list(ax.lines[0].get_ydata())), ([2.0], [0.61]))

    def test_run_json_losses_are_read_per_iteration(self):
        ax = self.render(convergence.plot_convergence([support.data("run.json")], log=True))
        self.assertEqual(list(ax.lines[0].get_xdata()), [0, 1, 2, 3])
        self.assertEqual(ax.get_yscale(), "log")

    def test_unknown_column_is_refused(self):
        with self.assertRaisesRegex(common.FormatError, "is not a column"):
            convergence.plot_convergence([support.data("metrics_a.csv")], column="accuracy")


class CommandLines(support.FigureTest):
    """Each module's main() writes the image named by --out."""

    def run_main(self, module, *args):
        out = self.out(f"{module.__name__.rsplit('.', 1)[1]}.png")
        module.main([*args, "--out", out])
        with open(out, "rb") as f:
            self.assertEqual(f.read(4), b"\x89PNG")

    def test_every_plot_writes_its_png(self):
        sims = []
        for i, s in enumerate(StragglerCurve.SIMS):
            sims.append(self.out(f"sim{i}.json"))
            with open(sims[-1], "w", encoding="utf-8") as f:
                json.dump(s, f)
        paper = self.out("paper.json")
        with open(paper, "w", encoding="utf-8") as f:
            json.dump({"dp-ring": 3.5}, f)
        self.run_main(speedup, support.data("prediction.json"), "--paper", paper)
        self.run_main(timeline, support.data("trace.json"), support.data("trace.json"), "--iterations", "0-1")
        self.run_main(scatter, support.data("validation.json"), support.data("validation_second.json"))
        self.run_main(breakdown, support.data("prediction.json"), "--shares")
        self.run_main(breakdown, *sims[:2])
        self.run_main(straggler, *sims)
        self.run_main(convergence, support.data("metrics_a.csv"), support.data("metrics_b.csv"), "--labels", "a,b")
        chunking = self.out("chunk.json")
        with open(chunking, "w", encoding="utf-8") as f:
            json.dump(ChunkCurve.CHUNKING, f)
        self.run_main(chunk, chunking, "--title", "toy")
        self.assertTrue(os.path.exists(self.out("chunk.png")))

    def test_bad_iterations_flag_is_refused(self):
        with self.assertRaisesRegex(common.FormatError, "--iterations"):
            timeline.main([support.data("trace.json"), "--iterations", "3-1", "--out", self.out("t.png")])
