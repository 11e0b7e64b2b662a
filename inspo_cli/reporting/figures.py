"""The report's figures, as PNG: curves over steps with bootstrap bands over seeds, and bars with each seed's point.

    fig2(groups, out / "fig2_training.png")   # reward, tool calls, prompt length, response length per step
    fig5(groups, out / "fig5_test_em.png")    # held-out EM at the periodic evaluations
    bars(table, out / "bars.png")             # EM (average over benchmarks) per variant, Fig. 3 / 6 style

At every step a group's line is the mean over the seeds that logged that step and its band the 95% bootstrap
percentile interval over those seeds (`ablation.stats.seed_band`), clipped to what the metric can be (rewards and
EM in [0, 1], counts and lengths at least 0); with one seed there is a line and no band, and every legend entry says
n. A figure whose series no run has (rewards in SFT, held-out EM with evaluation off) is not drawn and its function
returns False.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from inspo_cli.ablation.stats import seed_band
from inspo_cli.ablation.survival import text as share_text
from inspo_cli.reporting.sources import Group

FIG2_PANELS = (
    ("reward", "(a) reward"),
    ("search/searches_per_trajectory", "(b) tool calls per trajectory"),
    ("length/prompt", "(c) prompt length (tokens)"),
    # the paper's (d) is veRL's response_length: every token after the prompt, retrieved passages included
    ("length/response_with_observations", "(d) response length, passages included (tokens)"),
)
# runs logged before that metric existed have the policy's own tokens only; their panel says so
POLICY_RESPONSE_PANEL = ("length/response", "(d) response length, policy tokens only (tokens)")
RATES = ("reward", "eval/")  # metrics within [0, 1]; every other one drawn here is a count or a length (>= 0)


def bounds(key: str) -> tuple[float, float | None]:
    return (0.0, 1.0) if key.startswith(RATES) else (0.0, None)


def band(group: Group, key: str) -> list[tuple[int, float, float | None, float | None]]:
    """[(step, mean, low, high)] of `key` over the group's seeds, at every step some seed logged it."""
    by_step: dict[int, list[float]] = {}
    for run in group.runs:
        for row in run.metrics:
            if row.get(key) is not None:
                by_step.setdefault(int(row["step"]), []).append(float(row[key]))
    points = []
    for step in sorted(by_step):
        interval = seed_band(by_step[step], bounds(key))
        points.append((step, interval.mean, interval.low, interval.high))
    return points


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_png(fig, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    fig.savefig(tmp, format="png", dpi=120)
    os.replace(tmp, path)


def _draw(ax, group: Group, key: str, color, marker: str | None = None) -> bool:
    points = band(group, key)
    if not points:
        return False
    steps = [p[0] for p in points]
    n = len(group.runs)
    ax.plot(steps, [p[1] for p in points], color=color, marker=marker, markersize=3, label=f"{group.label} (n={n})")
    if any(p[2] is not None for p in points):
        ax.fill_between(
            steps,
            [p[2] if p[2] is not None else p[1] for p in points],
            [p[3] if p[3] is not None else p[1] for p in points],
            color=color,
            alpha=0.2,
            linewidth=0,
        )
    return True


def fig2_panels(groups: Sequence[Group]) -> list[tuple[str, str]]:
    """(metric, title) of Fig. 2's panels; (d) falls back to the policy's tokens for runs that predate the paper's."""
    panels = list(FIG2_PANELS)
    if not any(band(g, panels[3][0]) for g in groups):
        panels[3] = POLICY_RESPONSE_PANEL
    return panels


def fig2(groups: Sequence[Group], path: Path) -> bool:
    """Fig. 2's four panels, one line and band per group."""
    plt = pyplot()
    panels = fig2_panels(groups)
    if not any(band(g, key) for g in groups for key, _ in panels):
        return False
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    fig, axes = plt.subplots(2, 2, figsize=(11, 7))
    for ax, (key, title) in zip(axes.flat, panels):
        for i, group in enumerate(groups):
            _draw(ax, group, key, colors[i % len(colors)])
        ax.set_title(title)
        ax.set_xlabel("training step")
        ax.grid(alpha=0.3)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="lower center", ncol=min(4, len(labels)), frameon=False)
    fig.suptitle("Training metrics, mean over seeds and 95% bootstrap band")
    fig.tight_layout(rect=(0, 0.06, 1, 0.96))
    save_png(fig, path)
    plt.close(fig)
    return True


def fig5(groups: Sequence[Group], path: Path) -> bool:
    """Fig. 5: EM of the periodic held-out evaluations against the training step."""
    plt = pyplot()
    if not any(band(g, "eval/em") for g in groups):
        return False
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for i, group in enumerate(groups):
        _draw(ax, group, "eval/em", colors[i % len(colors)], marker="o")
    ax.set_xlabel("training step")
    ax.set_ylabel("test EM (greedy, best instruction)")
    ax.set_title("Test performance over training, mean over seeds and 95% bootstrap band")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    save_png(fig, path)
    plt.close(fig)
    return True


def bars(table: dict, path: Path) -> bool:
    """Fig. 3 / Fig. 6 style: each variant's average EM, its 95% interval over seeds and questions as a whisker,
    and every seed's own result as a point."""
    rows = [row for row in table["rows"] if row["average"] is not None]
    if not rows:
        return False
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(max(5.0, 1.1 * len(rows) + 2), 4.2))
    means = [row["average"]["mean"] for row in rows]
    lows = [row["average"]["low"] if row["average"]["low"] is not None else m for row, m in zip(rows, means)]
    highs = [row["average"]["high"] if row["average"]["high"] is not None else m for row, m in zip(rows, means)]
    positions = list(range(len(rows)))
    ax.bar(positions, means, color="#4C72B0", alpha=0.6)
    ax.errorbar(
        positions,
        means,
        yerr=[[m - max(lo, 0.0) for m, lo in zip(means, lows)], [min(hi, 1.0) - m for m, hi in zip(means, highs)]],
        fmt="none",
        ecolor="black",
        capsize=4,
        label="95% interval (seeds and questions)",
    )
    for x, row in zip(positions, rows):
        seeds = [r["average"] for r in row["runs"]]
        offsets = [x + 0.18 * (i - (len(seeds) - 1) / 2) / max(len(seeds) - 1, 1) for i in range(len(seeds))]
        ax.scatter(
            offsets,
            seeds,
            color="#DD8452",
            edgecolor="black",
            linewidth=0.5,
            zorder=3,
            s=18,
            label="one seed" if x == 0 else None,
        )
        ax.annotate(
            f"{row['average']['mean']:.3f} (n={row['n']})",
            (x, min(highs[x], 1.0)),
            textcoords="offset points",
            xytext=(0, 3),
            ha="center",
            fontsize=8,
        )
    top = max(max(highs), *(r["average"] for row in rows for r in row["runs"]))
    ax.set_ylim(0, min(1.0, top * 1.45) if top > 0 else 1.0)  # room above for the labels and the legend
    ax.set_xticks(positions, [row["variant"] for row in rows], rotation=20, ha="right")
    ax.set_ylabel(f"{table.get('metric_label', 'EM')}, average over benchmarks")
    checkpoint = "App. B's checkpoint" if table.get("rule") == "best" else "final checkpoints"
    ax.set_title(f"{table.get('metric_label', 'EM')} per variant ({checkpoint})", fontsize=11)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="upper right", ncol=2)
    fig.tight_layout()
    save_png(fig, path)
    plt.close(fig)
    return True


def decomposition(d: dict, path: Path) -> bool:
    """Instruction × weights: EM of the initial and trained policy (and the distilled one, and the static
    baseline's) with the seed instruction S and with the evolved I*; means with 95% whiskers, each seed a point,
    lines joining the initial and trained policy per instruction (parallel lines: no interaction). With distilled
    weights, the title's second line is the share of the instruction effect that survives without I*."""
    positions = [("initial", "initial policy"), ("trained", f"trained: {d['variant']}")]
    if "distilled" in d:
        found = d["cells"].get("distilled·seed")
        measured = f"{len(found['seeds']) if found else 0} of {d['distilled']['of']} seeds"
        positions.append(("distilled", f"distilled: {d['variant']}\n({measured})"))
    if d["static"]:
        positions.append(("static", f"trained: {d['static']}\n(static)"))
    if not any(d["cells"].get(f"{w}·{i}") for w, _ in positions for i in ("seed", "evolved")):
        return False
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.2 if "distilled" in d else 6.4, 4.2))
    for offset, (instruction, label, color) in zip(
        (-0.08, 0.08), (("seed", "seed instruction S", "#4C72B0"), ("evolved", "evolved instruction I*", "#DD8452"))
    ):
        xs: list[float] = []
        means: list[float] = []
        for x, (weights, _) in enumerate(positions):
            c = d["cells"].get(f"{weights}·{instruction}")
            if not c:
                continue
            low = c["low"] if c["low"] is not None else c["mean"]
            high = c["high"] if c["high"] is not None else c["mean"]
            ax.errorbar(
                [x + offset],
                [c["mean"]],
                yerr=[[c["mean"] - low], [high - c["mean"]]],
                fmt="o",
                color=color,
                capsize=4,
                label=label if not xs else None,
                zorder=3,
            )
            seeds = [p["cells"].get(f"{weights}·{instruction}") for p in d["per_seed"]]
            ax.scatter(
                [x + offset + 0.04] * len([s for s in seeds if s is not None]),
                [s for s in seeds if s is not None],
                color=color,
                alpha=0.45,
                s=12,
                zorder=2,
            )
            xs.append(x + offset)
            means.append(c["mean"])
        joined = [(x, m) for x, m in zip(xs, means) if x < 1.5]  # initial -> trained; the others stand apart
        if len(joined) == 2:
            ax.plot(*zip(*joined), color=color, alpha=0.7)
    ax.set_xticks(range(len(positions)), [label for _, label in positions], fontsize=9)
    ax.set_xlim(-0.5, len(positions) - 0.5)
    ax.set_ylabel("EM, average over benchmarks")
    title = f"Instruction × weights: {d['variant']} (points: seeds)"
    if "distilled" in d:
        title += f"\nshare of the instruction effect surviving without I*: {_share(d['distilled']['share'])}"
    ax.set_title(title, fontsize=11 if "distilled" not in d else 8)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    save_png(fig, path)
    plt.close(fig)
    return True


def _share(s: dict) -> str:
    """The share that survives, as short as a title's line allows."""
    if not s["n"]:
        return "not measured"
    return share_text(s) if s["defined"] else "undefined (I* − S not distinguishable from 0)"
