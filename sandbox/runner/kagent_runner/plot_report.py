"""Draws a batch report's speedups per level into a PNG, for `kagent report ID --plot FILE.png`.

Reads the report (agent/daemon/report.c's JSON: rows and summary) on stdin and writes the PNG
named by its one argument. Two panels, against eager PyTorch and against torch.compile: per
KernelBench level, the credited speedups of the correct problems as a box with every problem
drawn over it, on a log scale with a line at 1x; the label under each level says how many of
its problems have a credited speedup, out of how many. Uncredited and failed problems have no
speedup to draw, which the counts show.

Run by path, not as part of the package: it needs only the standard library and matplotlib,
not torch. Exits 3 when matplotlib cannot be imported (the command line says what to
install), 2 on bad input, 0 when the file is written.
"""

import json
import random
import sys

EXIT_NO_MATPLOTLIB = 3
EXIT_BAD_INPUT = 2


def speedups_by_level(report):
    """{level label: (speedups vs eager, speedups vs compile, problems)}, levels ascending."""
    groups = {}
    for row in report.get("rows") or []:
        level = row.get("level")
        label = f"level {level}" if isinstance(level, int) else "no level"
        eager, compile_, problems = groups.setdefault(label, ([], [], [0]))
        problems[0] += 1
        if not row.get("credited"):
            continue
        for key, values in (("speedup_vs_eager", eager), ("speedup_vs_compile", compile_)):
            value = row.get(key)
            if isinstance(value, (int, float)) and value > 0:
                values.append(float(value))

    def order(label):
        return (1, 0) if label == "no level" else (0, int(label.split()[1]))

    return [(label, *groups[label]) for label in sorted(groups, key=order)]


def draw(report, output):
    import matplotlib

    matplotlib.use("Agg")  # no display: a file is all that is wanted
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    as_speedup = FuncFormatter(lambda value, _: f"{value:g}x")

    groups = speedups_by_level(report)
    figure, axes = plt.subplots(1, 2, figsize=(11, 4.5), sharey=True)
    jitter = random.Random(0)  # the same report draws the same picture
    for axis, index, basis in ((axes[0], 1, "eager PyTorch"), (axes[1], 2, "torch.compile")):
        positions = range(1, len(groups) + 1)
        values = [group[index] for group in groups]
        drawn = [(position, v) for position, v in zip(positions, values) if v]
        if drawn:
            axis.boxplot([v for _, v in drawn], positions=[p for p, _ in drawn], widths=0.5,
                         showfliers=False)
        for position, level_values in zip(positions, values):
            axis.scatter([position + jitter.uniform(-0.12, 0.12) for _ in level_values],
                         level_values, s=14, alpha=0.7, color="C0", zorder=3)
        axis.axhline(1.0, color="grey", linestyle="--", linewidth=1)
        axis.set_xticks(list(positions))
        axis.set_xticklabels([f"{group[0]}\n{len(group[index])}/{group[3][0]} credited"
                              for group in groups])
        axis.set_xlim(0.5, len(groups) + 0.5)
        axis.set_yscale("log")
        axis.yaxis.set_major_formatter(as_speedup)
        axis.yaxis.set_minor_formatter(as_speedup)
        axis.set_title(f"speedup vs {basis}")
        axis.grid(axis="y", which="both", alpha=0.3)
    axes[0].set_ylabel("speedup (credited, log scale)")
    figure.suptitle(f"batch {report.get('batch', '?')}")
    figure.tight_layout()
    figure.savefig(output, format="png", dpi=100)
    plt.close(figure)


def main(argv):
    if len(argv) != 2:
        print("usage: plot_report.py OUTPUT.png < report.json", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        import matplotlib  # noqa: F401  (only whether it is there)
    except ImportError as error:
        print(f"plot_report.py: {error}", file=sys.stderr)
        return EXIT_NO_MATPLOTLIB
    try:
        report = json.load(sys.stdin)
    except ValueError as error:
        print(f"plot_report.py: the report is not JSON: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if not isinstance(report, dict) or not isinstance(report.get("rows"), list):
        print("plot_report.py: the report has no rows", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        draw(report, argv[1])
    except OSError as error:
        print(f"plot_report.py: cannot write {argv[1]}: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
