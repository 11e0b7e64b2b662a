"""An ablation's page: its plan, a table of every variant x seed whose cells link to the runs (status and EM), and
the tables and figures of its ablation.md and of `inspo report`'s default output (<ablation>/report/), with a run's
name or a variant's linked to its runs."""

from __future__ import annotations

from pathlib import Path

from inspo_cli.ablation.results import read_result
from inspo_cli.errors import InspoError
from inspo_cli.files import read_text
from inspo_cli.viewer.html import Markup, link, note, number, page, problem, table
from inspo_cli.viewer.markdown import render
from inspo_cli.viewer.sources import FIGURE_SUFFIXES, SAFE_PART, AblationSource, contained_file

REPORT = "report"  # `inspo report ABLATION` writes here by default
MARKDOWN_BYTES = 8 << 20


def _grid(source: AblationSource) -> Markup:
    ablation, plan = source.ablation, source.ablation.plan
    rows = []
    for variant in plan.variants:
        cells, values = [], []
        for seed in plan.seeds:
            planned = next((r for r in plan.runs() if r.variant == variant.name and r.seed == seed), None)
            rid = source.runs.get(planned.name) if planned else None
            if planned is None or rid is None:
                cells.append("not started")
                continue
            try:
                result, why = read_result(ablation.run_dir(planned), seed)
            except InspoError as error:
                cells.append(Markup("{}: {}").format(link(f"../../run/{rid}/index.html", planned.name), str(error)))
                continue
            if result is None:
                text = f"{planned.name}: {why or ablation.status(planned)}"
            else:
                em = sum(result.em.values()) / len(result.em)
                values.append(em)
                text = f"EM {em:.3f} (step {result.step})"
            cells.append(link(f"../../run/{rid}/index.html", text))
        mean = number(sum(values) / len(values)) if values else "-"
        overrides = Markup("<br>").join(Markup("<code>{}</code>").format(b) for b in variant.bars)
        rows.append((Markup("<b>{}</b><br>{}").format(variant.name, overrides), *cells, mean))
    return table(("variant", *(f"seed {s}" for s in plan.seeds), "mean EM"), rows, "grid")


def _markdown(source: AblationSource, file: Path, folder: list[str]) -> Markup:
    runs = {name: f"../../run/{rid}/index.html" for name, rid in source.runs.items()}
    variants = {v.name for v in source.ablation.plan.variants}

    def resolve(target: str) -> str | None:
        parts = [p for p in target.split("/") if p not in ("", ".")]
        if target.lower().endswith(FIGURE_SUFFIXES) and contained_file(source.path, folder + parts):
            return "files/" + "/".join(folder + parts)
        return runs.get(parts[-1]) if parts else None

    def cell_link(text: str) -> Markup | None:
        plain = text.strip("*` ")
        if plain in runs:
            return link(runs[plain], text)
        if plain in variants:
            seeds = [
                link(href, name.rsplit("-s", 1)[-1]) for name, href in runs.items() if name.rsplit("-s", 1)[0] == plain
            ]
            return Markup("{} (seeds {})").format(text, Markup(" ").join(seeds)) if seeds else None
        return None

    return render(read_text(file, "report file", MARKDOWN_BYTES), resolve, cell_link)


def ablation_page(source: AblationSource) -> str:
    plan = source.ablation.plan
    parts = [
        note(
            f"{source.path}: {len(plan.variants)} variants x {len(plan.seeds)} seeds "
            f"({', '.join(map(str, plan.seeds))}); cells link to the runs"
        )
    ]
    try:
        parts.append(_grid(source))
    except InspoError as error:
        parts.append(problem(str(error)))
    documents: list[tuple[Path, list[str]]] = [(source.path / "ablation.md", [])]
    report = source.path / REPORT
    if report.is_dir() and not report.is_symlink():
        documents.append((report / "index.md", [REPORT]))
        documents += [(p, [REPORT]) for p in sorted(report.glob("*.md")) if p.name != "index.md"]
    for file, folder in documents:
        if not file.is_file() or file.is_symlink() or not SAFE_PART.match(file.name):
            continue
        try:
            parts.append(
                Markup('<section class="report"><h2>{}</h2>{}</section>').format(
                    "/".join([*folder, file.name]), _markdown(source, file, folder)
                )
            )
        except InspoError as error:
            parts.append(problem(str(error)))
    if len(parts) == 2:
        parts.append(note("No table yet: `inspo ablate --collect` writes ablation.md, `inspo report` a report."))
    return page(f"Ablation {plan.name}", Markup("").join(parts), 2, [])
