"""The viewer's pages by path, the same paths served (`server.py`) and exported (`export.py`):

    index.html                                   the runs and ablations given
    run/<id>/index.html                          overview: recipe vs the paper, summary, curves, figures
    run/<id>/trajectories.html                   kept rollouts per step
    run/<id>/trajectories/step-<N>-<page>.html   a page of 100 trajectories
    run/<id>/instructions.html                   the lineage tree, texts and diffs
    run/<id>/evals.html                    scores per evaluated step
    run/<id>/evals/step-<N>-<page>.html    a page of 100 predictions
    run/<id>/files/plots/<name>.png              the run's figures
    compare/<id>~<step>~<id>~<step>.html         two evaluations on the same questions
    ablation/<id>/index.html                     an ablation's table and report
    ablation/<id>/files/<path>.png               its figures
    static/view.css, static/view.js              the vendored style and script

Anything else is None (404): ids are looked up among the sources, numbers parsed, and file paths checked
(`sources.contained_file`). A page's module is imported when the page is first asked for, so the server answers its
first page soon after it starts."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources

from inspo_cli.errors import InspoError
from inspo_cli.runs import RunDir
from inspo_cli.viewer.html import Markup, link, note, page, table
from inspo_cli.viewer.sources import Sources, contained_file

STATIC = {"view.css": "text/css; charset=utf-8", "view.js": "text/javascript; charset=utf-8"}
HTML = "text/html; charset=utf-8"
IMAGE = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg"}
NUMBERED = re.compile(r"^step-(\d{1,12})-(\d{1,9})\.html$")
COMPARE = re.compile(r"^([^~/]+)~(\d{1,12})~([^~/]+)~(\d{1,12})\.html$")
LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # not UTF-8: shown as U+FFFD, the replacement character
FIGURE_BYTES = 64 << 20  # a picture larger than this is not served (a figure of a report is well under 1 MB)
PAIRS_EVERY_WAY = 24  # up to this many evaluations in all, the export holds every pair; beyond, the usual ones


@dataclass
class Response:
    body: bytes
    content_type: str


def static_file(name: str) -> bytes:
    return resources.files("inspo_cli.viewer").joinpath("static").joinpath(name).read_bytes()


class Site:
    def __init__(self, sources: Sources):
        self.sources = sources

    # -- pages ----------------------------------------------------------------------------------------------------

    def get(self, path: str) -> Response | None:
        parts = [p for p in path.split("/") if p]
        if not parts:
            parts = ["index.html"]
        if parts == ["index.html"]:
            return self._html(self.index())
        if parts[0] == "static" and len(parts) == 2 and parts[1] in STATIC:
            return Response(static_file(parts[1]), STATIC[parts[1]])
        if parts[0] == "run" and len(parts) >= 3 and parts[1] in self.sources.runs:
            return self._run(parts[1], parts[2:])
        if parts[0] == "ablation" and len(parts) >= 3 and parts[1] in self.sources.ablations:
            source = self.sources.ablations[parts[1]]
            if parts[2:] == ["index.html"]:
                from inspo_cli.viewer.ablation_page import ablation_page

                return self._html(ablation_page(source))
            if parts[2] == "files":
                return self._file(contained_file(source.path, parts[3:]))
        if parts[0] == "compare" and len(parts) == 2 and (m := COMPARE.match(parts[1])):
            a, b = self._side(m.group(1), int(m.group(2))), self._side(m.group(3), int(m.group(4)))
            from inspo_cli.viewer.evaluations import compare_page

            return self._html(compare_page(a, b)) if a and b else None
        return None

    def _side(self, rid: str, step: int):
        from inspo_cli.viewer.data import RunData

        source = self.sources.runs.get(rid)
        return (RunData(source.run), rid, source.label, step) if source else None

    def _run(self, rid: str, rest: list[str]) -> Response | None:
        source = self.sources.runs[rid]
        if rest == ["index.html"]:  # the page a run opens on: the others' modules are not needed for it
            from inspo_cli.viewer.run_pages import overview_page

            return self._html(overview_page(source))
        from inspo_cli.viewer import evaluations, instructions, trajectories
        from inspo_cli.viewer.data import RunData

        data, title = RunData(source.run), source.label

        if rest == ["trajectories.html"]:
            return self._html(trajectories.index_page(data, rid, title))
        if rest == ["instructions.html"]:
            return self._html(instructions.instructions_page(source))
        if rest == ["evals.html"]:
            return self._html(evaluations.index_page(data, rid, title, self.compares_of(rid)))
        if len(rest) == 2 and rest[0] in ("trajectories", "evals") and (m := NUMBERED.match(rest[1])):
            step, number = int(m.group(1)), int(m.group(2))
            if number < 1:
                return None
            render = trajectories.step_page if rest[0] == "trajectories" else evaluations.step_page
            return self._html(render(data, rid, title, step, number))
        if rest[0] == "files" and rest[1:2] == [RunDir.PLOTS]:
            return self._file(contained_file(source.run.path, [RunDir.PLOTS, *rest[2:]]))
        return None

    @staticmethod
    def _html(text: str | None) -> Response | None:
        # a lone surrogate (a policy's broken byte, kept by the ASCII-escaped rollouts) shows as U+FFFD, not a 500
        return None if text is None else Response(LONE_SURROGATE.sub("\ufffd", text).encode("utf-8"), HTML)

    @staticmethod
    def _file(path) -> Response | None:
        if path is None or path.stat().st_size > FIGURE_BYTES:  # read whole: a bound on what one request holds
            return None
        return Response(path.read_bytes(), IMAGE[path.suffix.lower()])

    def index(self) -> str:
        parts = []
        if self.sources.ablations:
            parts.append(
                Markup("<h2>Ablations</h2>{}").format(
                    table(
                        ("ablation", "directory", "runs"),
                        [
                            (link(f"ablation/{a.id}/index.html", a.ablation.plan.name), a.label, len(a.runs))
                            for a in self.sources.ablations.values()
                        ],
                    )
                )
            )
        rows = []
        for r in self.sources.runs.values():
            try:
                summary = r.run.summary()
                state = "finished" if summary else "running or stopped"
            except InspoError as error:
                state = str(error)
            rows.append(
                (
                    link(f"run/{r.id}/index.html", r.label),
                    state,
                    link(f"run/{r.id}/trajectories.html", "trajectories"),
                    link(f"run/{r.id}/instructions.html", "instructions"),
                    link(f"run/{r.id}/evals.html", "evaluations"),
                )
            )
        parts.append(Markup("<h2>Runs</h2>{}").format(table(("run", "state", "", "", ""), rows)))
        compares = self.compares()
        if compares:
            parts.append(
                Markup("<h2>Evaluations side by side</h2><ul>{}</ul>").format(
                    Markup("").join(Markup("<li>{}</li>").format(link(h, label)) for h, label in compares)
                )
            )
        if not self.sources.runs:
            parts.append(note("Nothing to show yet."))
        return page("Runs and ablations", Markup("").join(parts), 0)

    # -- comparisons and the export's page list ----------------------------------------------------------------

    def _evaluated(self) -> list[tuple[str, int]]:
        from inspo_cli.viewer.data import RunData

        found = []
        for rid, source in self.sources.runs.items():
            found += [(rid, step) for step in sorted(RunData(source.run).evaluation_files())]
        return found

    def compares(self) -> list[tuple[str, str]]:
        """(path, label) of the comparisons offered: every pair when there are few evaluations; else each run's
        consecutive evaluations, and the last evaluations of an ablation's runs of the same seed."""
        from inspo_cli.viewer.evaluations import compare_name

        evaluated = self._evaluated()
        label = {rid: s.label for rid, s in self.sources.runs.items()}
        if len(evaluated) <= PAIRS_EVERY_WAY:
            pairs = [(a, b) for i, a in enumerate(evaluated) for b in evaluated[i + 1 :]]
        else:
            pairs = [(a, b) for a, b in zip(evaluated, evaluated[1:]) if a[0] == b[0]]
            last: dict[tuple, tuple[str, int]] = {}
            for rid, step in evaluated:
                s = self.sources.runs[rid]
                if s.ablation is not None:
                    last[(s.ablation, s.seed, s.variant)] = (rid, step)
            for (ab, seed, variant), a in last.items():
                pairs += [(a, b) for (ab2, seed2, v2), b in last.items() if (ab2, seed2) == (ab, seed) and v2 > variant]
        return [
            (compare_name(a[0], a[1], b[0], b[1]), f"{label[a[0]]} @ {a[1]} vs {label[b[0]]} @ {b[1]}")
            for a, b in pairs
        ]

    def compares_of(self, rid: str) -> list[tuple[str, str]]:
        found = []
        for href, text in self.compares():
            m = COMPARE.match(href.removeprefix("compare/"))
            if m and rid in (m.group(1), m.group(3)):
                found.append((href, text))
        return found

    def paths(self) -> Iterator[str]:
        """Every page and file the site has, for the export."""
        from inspo_cli.viewer import evaluations, trajectories
        from inspo_cli.viewer.data import RunData

        yield "index.html"
        yield from (f"static/{name}" for name in STATIC)
        for rid, source in self.sources.runs.items():
            data = RunData(source.run)
            for name in ("index.html", "trajectories.html", "instructions.html", "evals.html"):
                yield f"run/{rid}/{name}"
            for step in sorted(data.rollout_steps()):
                try:
                    pages = data.step_stats(step).pages
                except InspoError:
                    pages = 1
                yield from (f"run/{rid}/{trajectories.step_page_name(step, p)}" for p in range(1, pages + 1))
            for step in sorted(data.evaluation_files()):
                try:
                    pages = max(1, -(-data.prediction_count(step) // 100))
                except InspoError:
                    pages = 1
                yield from (f"run/{rid}/{evaluations.pred_page_name(step, p)}" for p in range(1, pages + 1))
            if source.run.plots_dir.is_dir():
                yield from (
                    f"run/{rid}/files/{RunDir.PLOTS}/{p.name}" for p in sorted(source.run.plots_dir.glob("*.png"))
                )
        for aid, ablation in self.sources.ablations.items():
            yield f"ablation/{aid}/index.html"
            for picture in sorted(ablation.path.rglob("*.png")):
                relative = picture.relative_to(ablation.path)
                if relative.parts[0] != "runs":
                    yield f"ablation/{aid}/files/{relative.as_posix()}"
        yield from (href for href, _ in self.compares())
