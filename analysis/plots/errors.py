"""Error summary of validations: how far trainsim's predictions are from the
measured iteration times, per strategy and overall, per prediction method.

Errors are relative, (predicted - measured) / measured (see common.relative_error).
    python3 -m analysis.plots.errors VALIDATION.json [VALIDATION.json ...]
"""
import statistics
from dataclasses import dataclass

from analysis.plots import common

OVERALL = "overall"


@dataclass
class ErrorStats:
    count: int
    median_abs: float  # median of |error|
    worst: float       # the error of largest magnitude, with its sign
    bias: float        # mean signed error: > 0 when predictions run slow

    @staticmethod
    def of(errors):
        return ErrorStats(count=len(errors), median_abs=statistics.median(abs(e) for e in errors),
                          worst=max(errors, key=abs), bias=statistics.fmean(errors))


def summarize_errors(validations):
    """{strategy or "overall": {method: ErrorStats}} over one or more
    validations (paths or dicts); methods without a prediction are left out."""
    if isinstance(validations, (str, dict)) or hasattr(validations, "__fspath__"):
        validations = [validations]
    errors = {}  # (group, method) -> [error]
    for source in validations:
        for r in common.load_validation(source)["results"]:
            for method in common.METHODS:
                e = r.get(f"error_{method}")
                if e is None:
                    continue
                errors.setdefault((r["strategy"], method), []).append(e)
                errors.setdefault((OVERALL, method), []).append(e)
    summary = {}
    for (group, method), values in errors.items():
        summary.setdefault(group, {})[method] = ErrorStats.of(values)
    # "overall" last, strategies in first-seen order
    return {g: summary[g] for g in [g for g in summary if g != OVERALL] + [OVERALL] if g in summary}


def error_table(summary):
    """The summary as an aligned text table, errors in percent."""
    header = ("strategy", "method", "n", "median |error|", "worst", "bias")
    rows = [(group, method, str(s.count), f"{100 * s.median_abs:.1f}%", f"{100 * s.worst:+.1f}%",
             f"{100 * s.bias:+.1f}%")
            for group, by_method in summary.items() for method, s in by_method.items()]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]

    def line(cells):  # names left-aligned, numbers right-aligned
        return "  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))
    return "\n".join([line(header), "-" * len(line(header))] + [line(r) for r in rows])


def main(argv=None):
    import argparse
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("inputs", nargs="+", metavar="VALIDATION", help="trainsim.validation/1 JSON files")
    args = p.parse_args(argv)
    print(error_table(summarize_errors(args.inputs)))


if __name__ == "__main__":
    common.run_cli(main)
