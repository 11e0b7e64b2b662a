"""The trajectory pages: per step, the kept rollouts a page at a time, each with the policy's tokens and the inserted
ones told apart (the loss mask's runs), turn by turn, its reward parts, and data attributes the filters read."""

from __future__ import annotations

from inspo_cli.errors import InspoError
from inspo_cli.viewer.data import PAGE_ROWS, RunData
from inspo_cli.viewer.html import Markup, link, note, number, page, problem, table

FILTERS = Markup(
    '<form class="filters" data-target=".traj">'
    '<label><input type="checkbox" name="wrong"> wrong answers</label> '
    '<label><input type="checkbox" name="invalid"> invalid actions</label> '
    '<label><input type="checkbox" name="truncated"> truncated</label> '
    "{selects}"
    '<span class="shown" aria-live="polite"></span></form>'
)


def select(name: str, label: str, values) -> Markup:
    options = Markup("").join(Markup('<option value="{}">{}</option>').format(v, v) for v in sorted(values))
    return Markup('<label>{} <select name="{}"><option value="">any</option>{}</select></label> ').format(
        label, name, options
    )


def segments_html(segments: list[dict]) -> Markup:
    """The completion as the loss saw it: the policy's runs and the inserted ones (observations), each labelled."""
    parts = []
    for turn, segment in enumerate(segments):
        by = "policy" if segment.get("by") == "policy" else "inserted"
        title = "written by the policy (trained on)" if by == "policy" else "inserted by the toolkit (masked out)"
        parts.append(
            Markup('<span class="{}" title="{}" data-turn="{}">{}</span>').format(
                by, title, turn, segment.get("text", "")
            )
        )
    return Markup('<pre class="completion">{}</pre>').format(Markup("").join(parts))


def trajectory_html(row: dict, instructions_href: str) -> Markup:
    iid = row["instruction_id"] or "-"
    flags = [
        f
        for f, on in (
            ("wrong", row["em"] < 1),
            ("truncated", row["truncated"]),
            ("invalid", row["invalid_actions"] > 0),
        )
        if on
    ]
    facts = Markup(" · ").join(
        [
            Markup("group {}").format(row["group"]),
            Markup("instruction {}").format(link(f"{instructions_href}#{iid}", iid))
            if row["instruction_id"]
            else Markup("no instruction"),
            Markup("reward <b>{}</b>").format(number(row["reward"])),
            Markup("EM {}").format(number(row["em"], 0)),
            Markup("format bonus {}").format(number(row.get("format_bonus"))),
            Markup("{} searches").format(len(row["searches"])),
            Markup("stop: {}").format(row.get("stop_reason") or "-"),
            Markup("invalid actions {}").format(row["invalid_actions"]),
            *(Markup('<span class="flag">{}</span>').format(f) for f in flags),
        ]
    )
    searches = Markup("").join(Markup("<li><code>{}</code></li>").format(q) for q in row["searches"])
    prompt = row.get("prompt")
    return Markup(
        '<article class="traj" data-wrong="{wrong}" data-invalid="{invalid}" data-truncated="{truncated}" '
        'data-type="{qtype}" data-instruction="{iid}">'
        '<h3>{qid}: {question}</h3><p class="facts">{facts}</p>'
        '<p>gold: <b>{gold}</b> · answer: <b class="answer">{answer}</b>{qtype_text}</p>'
        "{searches}{prompt}{completion}</article>"
    ).format(
        wrong=int(row["em"] < 1),
        invalid=int(row["invalid_actions"] > 0),
        truncated=int(bool(row["truncated"])),
        qtype=row.get("type") or "-",
        iid=iid,
        qid=row["qid"],
        question=row["question"],
        facts=facts,
        gold=" | ".join(row["golden_answers"]),
        answer=row["answer"] if row["answer"] is not None else "(none)",
        qtype_text=Markup(" · type {}").format(row["type"]) if row.get("type") else "",
        searches=Markup('<ol class="searches">{}</ol>').format(searches) if row["searches"] else "",
        prompt=Markup("<details><summary>prompt</summary><pre>{}</pre></details>").format(prompt) if prompt else "",
        completion=segments_html(row["segments"]),
    )


def pager(current: int, pages: int, href) -> Markup:
    if pages <= 1:
        return Markup("")
    shown = sorted({1, pages, *range(max(1, current - 3), min(pages, current + 3) + 1)})
    items, last = [], 0
    for p in shown:
        if p > last + 1:
            items.append(Markup("<span>…</span>"))
        items.append(Markup("<b>{}</b>").format(p) if p == current else link(href(p), p))
        last = p
    return Markup('<nav class="pager">page {}</nav>').format(Markup(" ").join(items))


def step_page_name(step: int, page_number: int) -> str:
    return f"trajectories/step-{step}-{page_number}.html"


def index_page(data: RunData, rid: str, title: str) -> str:
    steps = data.rollout_steps()
    if not steps:
        body = note(
            "This run kept no rollouts (run.save_rollouts: 0, or a run from before inspo 0.1 kept them); "
            "its evaluations' predictions are under evaluations."
        )
        return page(
            f"{title}: trajectories", body, 2, [(f"run/{rid}/index.html", title)], f"run/{rid}", "trajectories.html"
        )
    rows: list[tuple] = []
    for step in sorted(steps):
        try:
            s = data.step_stats(step)
        except InspoError as error:
            rows.append((step, problem(str(error)), "", "", "", "", "", ""))
            continue
        used = ", ".join(f"{i} ({n})" for i, n in sorted(s.instructions.items()))
        rows.append(
            (
                link(step_page_name(step, 1), f"step {step}"),
                s.rows,
                len(s.groups),
                number(s.reward / max(s.rows, 1)),
                number(s.em / max(s.rows, 1)),
                s.wrong,
                s.truncated,
                used,
            )
        )
    body = table(
        ("step", "trajectories", "groups", "mean reward", "EM", "wrong", "truncated", "instructions (rows)"), rows
    )
    return page(
        f"{title}: trajectories", body, 2, [(f"run/{rid}/index.html", title)], f"run/{rid}", "trajectories.html"
    )


def step_page(data: RunData, rid: str, title: str, step: int, page_number: int) -> str | None:
    if step not in data.rollout_steps():
        return None
    crumbs = [(f"run/{rid}/index.html", title), (f"run/{rid}/trajectories.html", "trajectories")]
    heading = f"{title}: step {step}"
    try:
        stats = data.step_stats(step)
        if page_number > stats.pages:
            return None
        rows = data.rollouts(step, page_number)
    except InspoError as error:
        return page(heading, problem(str(error)), 3, crumbs, f"run/{rid}", "trajectories.html")
    first = (page_number - 1) * PAGE_ROWS + 1
    pages = pager(page_number, stats.pages, lambda p: f"step-{step}-{p}.html")
    legend = Markup(
        '<p class="legend"><span class="policy">policy tokens (trained on)</span> '
        '<span class="inserted">inserted tokens (observations, masked out of the loss)</span></p>'
    )
    selects = select("instruction", "instruction", stats.instructions) + select("type", "type", stats.types)
    body = Markup("{}<p>trajectories {}–{} of {} ({} groups kept at this step)</p>{}{}{}{}").format(
        legend,
        first,
        first + len(rows) - 1,
        stats.rows,
        len(stats.groups),
        FILTERS.format(selects=selects),
        pages,
        Markup("").join(trajectory_html(row, "../instructions.html") for row in rows),
        pages,
    )
    return page(heading, body, 3, crumbs, f"run/{rid}", "trajectories.html")
