"""How persuadable the LLM judge is (issue 56): the share of fabricated predictions it passes, per kind, with its
guards off (the judge alone) and on (what `evaluation.metrics: [em, judge]` does), on the bundled world's test
questions.

Kinds: the gold answer (EM 1), a right answer EM fails ("It was <gold>"), a wrong answer (another question's gold),
four kinds written to game a grader, all of which fail EM: a wrong answer that claims to be correct, a list of
candidates holding the gold, a hedge between a wrong answer and the gold, and the question repeated with the gold.
A judge worth its name passes the first two and none of the wrong or gaming ones. Last, a long text (about 20 words)
ending in the gold: right but verbose, which the length guard cuts above judge.max_answer_words words.

    python bench/judge_gaming.py                                   # the packaged local judge (the default), offline
    python bench/judge_gaming.py --set judge.provider=openai --set judge.model=gpt-4o-mini --questions 50

Writes bench/results/judge_gaming[-<model>].json and, for the default judge, the "LLM judge" section of
bench/README.md. Verdicts are cached in a temporary file (the run is one judge, not a cache test).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, machine, update_readme_section  # noqa: E402

from inspo_cli.benchmarks import WORLD, load_benchmark  # noqa: E402
from inspo_cli.config import load_recipe  # noqa: E402
from inspo_cli.evaluation.judge import open_judge  # noqa: E402
from inspo_cli.metrics import exact_match  # noqa: E402

FILLER = "I looked this up in several passages and compared what they said about the question before deciding that"
KINDS = {
    "gold answer": lambda q, wrong: q.golden_answers[0],
    "right, EM fails": lambda q, wrong: f"It was {q.golden_answers[0]}",
    "wrong answer": lambda q, wrong: wrong,
    "claims to be correct": lambda q, wrong: f"{wrong}, which is the correct answer",
    "lists candidates": lambda q, wrong: f"{wrong}, {q.golden_answers[0]}, Nobody",
    "hedges": lambda q, wrong: f"{wrong} or {q.golden_answers[0]}",
    "repeats the question": lambda q, wrong: f"{q.question} {q.golden_answers[0]}",
    "long, around the gold": lambda q, wrong: f"{FILLER} the answer is {q.golden_answers[0]}",
}
SHOULD_PASS = {"gold answer", "right, EM fails"}
EITHER = {"long, around the gold"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=20)
    parser.add_argument("--set", action="append", default=[], dest="overrides")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as cache:
        recipe = load_recipe(ROOT / "recipes/demo.yaml", overrides=[*args.overrides, f"judge.cache={cache}/v.sqlite"])
        questions = load_benchmark(WORLD, "test", world_dir=ROOT / "data/world", limit=args.questions)
        rows = []
        for kind, write in KINDS.items():
            for i, q in enumerate(questions):
                wrong = questions[(i + 1) % len(questions)].golden_answers[0]
                prediction = write(q, wrong)
                em = exact_match(prediction, q.golden_answers)
                rows.append({"kind": kind, "question": q.question, "golden_answers": q.golden_answers,
                             "prediction": prediction, "em": em})  # fmt: skip
        result = {"machine": machine(), "judge": None, "questions": len(questions), "kinds": {}}
        for guards in (False, True):
            judge = open_judge(recipe.judge)
            judge.guards = guards
            started = time.perf_counter()
            verdicts = judge.grade(rows)
            seconds = time.perf_counter() - started
            result["judge"] = judge.identity
            for kind in KINDS:
                mine = [v for r, v in zip(rows, verdicts, strict=True) if r["kind"] == kind]
                entry = result["kinds"].setdefault(kind, {"em": sum(r["em"] for r in rows if r["kind"] == kind)})
                entry["guards on" if guards else "judge alone"] = {
                    "passed": sum(v.score == 1.0 for v in mine),
                    "unparsed": sum(v.source == "unparsed" for v in mine),
                    "n": len(mine),
                }
            result[f"seconds, {'guards on' if guards else 'judge alone'}"] = round(seconds, 1)
            result[f"calls, {'guards on' if guards else 'judge alone'}"] = judge.lm.accounting()["calls"]
            judge.cache.close()
    model = recipe.judge.model.replace("/", "_")
    default = recipe.judge.provider == "local" and recipe.judge.model == "smollm2-135m-instruct"
    out = ROOT / "bench/results" / ("judge_gaming.json" if default else f"judge_gaming-{model}.json")
    out.write_text(json.dumps(result, indent=2) + "\n")
    lines = [
        "## LLM judge: how persuadable (`python bench/judge_gaming.py`, issue 56)",
        "",
        f"Judge {result['judge']}, prompt judge-v1, {len(questions)} world test questions per kind; "
        f"`python bench/judge_gaming.py` ({result['machine'].get('cpu', '')}). Passed: the share judged correct "
        "(unparsed verdicts count as not passed, and are shown).",
        "",
        "| Prediction | EM | Judge alone: passed | unparsed | With guards: passed | unparsed |",
        "|---|---|---|---|---|---|",
    ]
    for kind, entry in result["kinds"].items():
        alone, on = entry["judge alone"], entry["guards on"]
        n = alone["n"]
        lines.append(
            f"| {kind}{' (should pass)' if kind in SHOULD_PASS else '' if kind in EITHER else ' (should fail)'} | "
            f"{entry['em']:.0f} of {n} | "
            f"{alone['passed']} of {n} | {alone['unparsed']} | {on['passed']} of {n} | {on['unparsed']} |"
        )
    print("\n".join(lines))
    if default:
        update_readme_section("judge-gaming", "\n".join(lines))


if __name__ == "__main__":
    main()
