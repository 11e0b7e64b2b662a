"""The screenshots docs/view.md shows: every kind of page of `inspo view` at 1280 px, in headless Chromium, from a
real run and a real ablation.

    python bench/view_screenshots.py --ablation runs/ablations/world-distill --run inspo-s4 --against search-r1-s4

Writes docs/view/*.png (overview, trajectories, instructions, evaluations, compare, ablation).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT  # noqa: E402

from inspo_cli.viewer.server import make_app  # noqa: E402
from inspo_cli.viewer.site import Site  # noqa: E402
from inspo_cli.viewer.sources import discover  # noqa: E402
from retriever.serving import serve_in_background  # noqa: E402

OUT = ROOT / "docs" / "view"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ablation", type=Path, required=True)
    parser.add_argument("--run", required=True, help="the run of the ablation the run pages show")
    parser.add_argument("--against", required=True, help="the run its evaluation is compared with")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    sources = discover([args.ablation])
    site = Site(sources)
    ((aid, ablation),) = sources.ablations.items()
    rid, other = ablation.runs[args.run], ablation.runs[args.against]
    run = sources.runs[rid].run
    steps = sorted(int(p.name.split("-")[1].split(".")[0]) for p in run.rollouts_dir.iterdir())
    evaluated = run.evaluated_steps()
    OUT.mkdir(parents=True, exist_ok=True)
    chromium = shutil.which("chromium") or shutil.which("chromium-headless-shell")
    with serve_in_background(make_app(site)) as base, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})

        def shot(name: str, path: str, then=None) -> None:
            page.goto(f"{base}/{path}")
            if then is not None:
                then()
            page.screenshot(path=str(OUT / f"{name}.png"))
            print(f"docs/view/{name}.png: /{path}")

        shot(
            "overview",
            f"run/{rid}/index.html",
            lambda: page.locator("h2:has-text('Curves')").scroll_into_view_if_needed(),
        )
        shot("trajectories", f"run/{rid}/trajectories/step-{steps[-1]}-1.html#wrong=1")
        shot("instructions", f"run/{rid}/instructions.html")
        shot("evaluations", f"run/{rid}/evals/step-{evaluated[-1]}-1.html#wrong=1")
        shot("compare", f"compare/{other}~{evaluated[-1]}~{rid}~{evaluated[-1]}.html")
        shot("ablation", f"ablation/{aid}/index.html")
        browser.close()


if __name__ == "__main__":
    main()
