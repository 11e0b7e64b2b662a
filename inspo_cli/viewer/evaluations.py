"""The evaluation pages: per evaluated step, the scores and the predictions with gold answers and search traces, and
two evaluations side by side on the same questions (which questions flipped)."""

from __future__ import annotations

from inspo_cli.errors import InspoError
from inspo_cli.evaluation.report import read_results
from inspo_cli.runs.file_shapes import DAMAGED
from inspo_cli.viewer.data import PAGE_ROWS, RunData
from inspo_cli.viewer.html import Markup, link, note, number, page, problem, table
from inspo_cli.viewer.trajectories import pager, segments_html, select

FILTERS = Markup(
    '<form class="filters" data-target=".pred">'
    '<label><input type="checkbox" name="wrong"> wrong answers</label> '
    '<label><input type="checkbox" name="invalid"> invalid actions</label> '
    "{selects}"
    '<span class="shown" aria-live="polite"></span></form>'
)
COMPARE_LIMIT = 200_000  # predictions held per side of a comparison (the fields it shows only)


def pred_page_name(step: int, page_number: int) -> str:
    return f"evals/step-{step}-{page_number}.html"


def compare_name(rid_a: str, step_a: int, rid_b: str, step_b: int) -> str:
    return f"compare/{rid_a}~{step_a}~{rid_b}~{step_b}.html"


def prediction_html(row: dict) -> Markup:
    queries = row.get("queries") or []
    trace = Markup("").join(Markup("<li><code>{}</code></li>").format(q) for q in queries)
    if row.get("segments"):
        response = segments_html(row["segments"])
    elif row.get("response") is not None:
        response = Markup('<pre class="completion">{}</pre>').format(row["response"])
    else:
        response = Markup("")
    wrong = row["em"] < 1
    return Markup(
        '<article class="pred" data-wrong="{w}" data-invalid="{inv}" data-benchmark="{b}" data-stop="{stop}">'
        "<h3>{id}: {q}</h3><p>gold: <b>{gold}</b> · prediction: <b>{p}</b> · EM {em} · F1 {f1} · {n} searches · "
        "stop: {stop}{flag}</p>{trace}{response}</article>"
    ).format(
        w=int(wrong),
        inv=int((row.get("invalid_actions") or 0) > 0),
        b=row["benchmark"],
        stop=row.get("stop_reason") or "-",
        id=row["id"],
        q=row.get("question", ""),
        gold=" | ".join(row.get("golden_answers") or []),
        p=row.get("prediction") or "(none)",
        em=number(row["em"], 0),
        f1=number(row.get("f1")),
        n=row.get("searches", len(queries)),
        flag=Markup(' <span class="flag">wrong</span>') if wrong else "",
        trace=Markup('<ol class="searches">{}</ol>').format(trace) if queries else "",
        response=Markup("<details><summary>trajectory</summary>{}</details>").format(response) if response else "",
    )


def _scores(data: RunData, step: int):
    results = read_results(data.run.evaluation_dir(step) / "results.json", DAMAGED)
    rows = []
    for method, benchmarks in results["scores"].items():
        for benchmark, s in benchmarks.items():
            rows.append(
                (
                    method,
                    benchmark,
                    s["n"],
                    number(s["em"]),
                    number(s.get("f1")),
                    number(s.get("subem")),
                    number(s.get("searches"), 2),
                )
            )
    return rows


def index_page(data: RunData, rid: str, title: str, compares: list[tuple[str, str]]) -> str:
    files = data.evaluation_files()
    crumbs = [(f"run/{rid}/index.html", title)]
    if not files:
        return page(
            f"{title}: evaluations",
            note("No evaluation yet: `inspo evaluate --run` writes one."),
            2,
            crumbs,
            f"run/{rid}",
            "evals.html",
        )
    parts = []
    for step in sorted(files):
        parts.append(Markup("<h2>{}</h2>").format(link(pred_page_name(step, 1), f"step {step}")))
        try:
            parts.append(
                table(("method", "benchmark", "questions", "EM", "F1", "SubEM", "searches"), _scores(data, step))
            )
        except InspoError as error:
            parts.append(problem(str(error)))
    if compares:
        parts.append(
            Markup("<h2>Side by side</h2><ul>{}</ul>").format(
                Markup("").join(Markup("<li>{}</li>").format(link("../../" + href, label)) for href, label in compares)
            )
        )
    return page(f"{title}: evaluations", Markup("").join(parts), 2, crumbs, f"run/{rid}", "evals.html")


def step_page(data: RunData, rid: str, title: str, step: int, page_number: int) -> str | None:
    if step not in data.evaluation_files():
        return None
    crumbs = [(f"run/{rid}/index.html", title), (f"run/{rid}/evals.html", "evaluations")]
    heading = f"{title}: evaluation at step {step}"
    try:
        count = data.prediction_count(step)
        pages = max(1, -(-count // PAGE_ROWS))
        if page_number > pages:
            return None
        rows = list(data.predictions(step, page_number))
    except InspoError as error:
        return page(heading, problem(str(error)), 3, crumbs, f"run/{rid}", "evals.html")
    nav = pager(page_number, pages, lambda p: f"step-{step}-{p}.html")
    selects = select("benchmark", "benchmark", {r["benchmark"] for r in rows}) + select(
        "stop", "stop", {r.get("stop_reason") or "-" for r in rows}
    )
    first = (page_number - 1) * PAGE_ROWS + 1
    body = Markup("<p>predictions {}–{} of {}</p>{}{}{}{}").format(
        first,
        first + len(rows) - 1,
        count,
        FILTERS.format(selects=selects),
        nav,
        Markup("").join(prediction_html(r) for r in rows),
        nav,
    )
    return page(heading, body, 3, crumbs, f"run/{rid}", "evals.html")


def _side(data: RunData, step: int) -> dict:
    kept: dict[tuple, tuple] = {}
    for row in data.predictions(step, page=None):
        if len(kept) >= COMPARE_LIMIT:
            break
        kept[(row["method"], row["benchmark"], str(row["id"]))] = (
            row["em"],
            row.get("prediction"),
            row.get("question", ""),
            tuple(row.get("golden_answers") or ()),
        )
    return kept


def compare_page(a: tuple[RunData, str, str, int], b: tuple[RunData, str, str, int]) -> str | None:
    (data_a, rid_a, title_a, step_a), (data_b, rid_b, title_b, step_b) = a, b
    if step_a not in data_a.evaluation_files() or step_b not in data_b.evaluation_files():
        return None
    name_a, name_b = f"{title_a} @ step {step_a}", f"{title_b} @ step {step_b}"
    heading = f"{name_a} vs {name_b}"
    try:
        left, right = _side(data_a, step_a), _side(data_b, step_b)
    except InspoError as error:
        return page(heading, problem(str(error)), 1, [])
    common = [k for k in left if k in right]
    gained = [k for k in common if left[k][0] < 1 <= right[k][0]]
    lost = [k for k in common if left[k][0] >= 1 > right[k][0]]
    both = sum(1 for k in common if left[k][0] >= 1 and right[k][0] >= 1)
    em = (
        (sum(left[k][0] for k in common) / len(common), sum(right[k][0] for k in common) / len(common))
        if common
        else (None, None)
    )
    summary = table(
        ("", "questions", f"EM {name_a}", f"EM {name_b}", "right in both", "wrong → right", "right → wrong"),
        [("on the same questions", len(common), number(em[0]), number(em[1]), both, len(gained), len(lost))],
    )

    def rows(keys):
        return [
            (k[1], k[2], left[k][2], " | ".join(left[k][3]), left[k][1] or "(none)", right[k][1] or "(none)")
            for k in keys
        ]

    headers = ("benchmark", "id", "question", "gold", f"{name_a}", f"{name_b}")
    only = len(left) - len(common), len(right) - len(common)
    body = Markup("{}{}<h2>Wrong → right ({})</h2>{}<h2>Right → wrong ({})</h2>{}").format(
        summary,
        note(f"{only[0]} questions only in the first, {only[1]} only in the second (left out)") if any(only) else "",
        len(gained),
        table(headers, rows(gained), "flips"),
        len(lost),
        table(headers, rows(lost), "flips"),
    )
    crumbs = [(f"run/{rid_a}/evals.html", title_a), (f"run/{rid_b}/evals.html", title_b)]
    return page(heading, body, 1, crumbs)
