"""docs/contributing.md's worked examples are true: a proposer, a selection rule and a tool added in-tree, and a
strategy from an outside package, need exactly the files the docs say, and every list a user sees (help, `recipe
explain`, the generated reference and strategies pages, the ablation axes, the config's checks) shows them with no
other edit. The test writes the docs' code blocks into a copy of the package and asks it, in a fresh interpreter."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from inspo_cli.registry import SELECTIONS

ROOT = Path(__file__).resolve().parents[2]
# "`path`:" or "`path`, in `TABLE`:", a blank line, then a ```python block: what the docs tell a contributor to write
DOC_BLOCK = re.compile(
    r"^`(?P<path>[\w./]+\.py)`(?:, in `(?P<table>[A-Z_]+)`)?:\n\n```python\n(?P<code>.*?)```", re.MULTILINE | re.DOTALL
)


def doc_blocks() -> list[tuple[str, str | None, str]]:
    return [(m["path"], m["table"], m["code"]) for m in DOC_BLOCK.finditer((ROOT / "docs/contributing.md").read_text())]


def test_the_docs_worked_examples_are_one_file_and_one_registry_line_each():
    blocks = doc_blocks()
    assert [(path, table) for path, table, _ in blocks] == [
        ("inspo_cli/instructions/proposers/contrast.py", None),
        ("inspo_cli/registry.py", "PROPOSERS"),
        ("inspo_cli/instructions/selection/uniform.py", None),
        ("inspo_cli/registry.py", "SELECTIONS"),
        ("inspo_cli/agent/tools/word_count.py", None),
        ("inspo_cli/registry.py", "TOOLS"),
        ("my_lab/strategies.py", None),
    ]
    for path, _, _ in blocks[:6:2]:  # the examples are not shipped: the test adds them to a copy
        assert not (ROOT / path).exists()


SCRIPT = r"""
import json, sys
from typer.testing import CliRunner
from inspo_cli.cli import app

runner, out = CliRunner(), {}
def run(*args):
    result = runner.invoke(app, list(args), terminal_width=400)
    return {"code": result.exit_code, "output": result.output}

out["explain_proposer"] = run("recipe", "explain", "population.proposer")
out["explain_selection"] = run("recipe", "explain", "population.selection")
out["ablate_help"] = run("ablate", "--help")
out["check"] = run("recipe", "check", "recipes/demo.yaml", "--set", "population.proposer=contrast",
                   "--set", "population.selection=uniform", "--json")
out["check_outside"] = run("recipe", "check", "recipes/demo.yaml", "--set",
                           "population.proposer=my_lab.strategies:prompt", "--json")
out["plan"] = run("ablate", "--recipe", "recipes/demo.yaml", "--proposer", "contrast,my_lab.strategies:prompt",
                  "--selection", "uniform", "--seeds", "0", "--dry-run", "--json")
out["study"] = run("ablate", "--recipe", "recipes/demo.yaml", "--study", "selection", "--seeds", "0", "--dry-run",
                   "--json")
out["explain_tools"] = run("recipe", "explain", "agent.tools")
out["check_tool"] = run("recipe", "check", "recipes/demo.yaml", "--set", "agent.tools=[search, word_count]", "--json")
out["tools_plan"] = run("ablate", "--recipe", "recipes/demo.yaml", "--tools", "search,search+word_count", "--seeds",
                        "0", "--dry-run", "--json")

from inspo_cli.docs_gen.strategies import markdown
from inspo_cli.docs_gen.recipe import markdown as reference
out["strategies_md"], out["reference_md"] = markdown(), reference()

# the strategies themselves, as a run loads them
import random
from inspo_cli.config import load_recipe
from inspo_cli.instructions.population import InstructionPopulation
from inspo_cli.instructions.proposers import load_proposer
from inspo_cli.instructions.selection import load_selection
from inspo_cli.instructions.selection.base import Arm
recipe = load_recipe("recipes/demo.yaml", ["population.instructions=[first instruction, second instruction]"])
population = InstructionPopulation(recipe.population, seed=0)
parent = population.ranked()[0]
out["contrast_prompt"] = load_proposer("contrast")(parent, population, None, recipe.population, random.Random(0))
out["outside_prompt"] = load_proposer("my_lab.strategies:prompt")(parent, population, None, recipe.population,
                                                                   random.Random(0))
arms = [Arm("a", 0.9, 5, 4.5), Arm("b", 0.1, 5, 0.5), Arm("c", 0.0, 0, 0.0)]
out["uniform"] = load_selection("uniform")(arms, recipe.population, 1).probabilities()
from inspo_cli.agent.tools import ToolContext, build_tools
counter = build_tools(["search", "word_count"], ToolContext())[1]
out["word_count"] = [o.text for o in counter.call([{"text": "three short words"}, {"text": "one"}])]
json.dump(out, sys.stdout)
"""


@pytest.fixture(scope="module")
def followed(tmp_path_factory):
    """A copy of the package with the docs' files written and their registry lines added, as a contributor would,
    and what every list says there (run in a fresh interpreter on the copy)."""
    copy = tmp_path_factory.mktemp("contributor")
    ignore = shutil.ignore_patterns("__pycache__")
    for name in ("inspo_cli", "retriever", "recipes"):
        shutil.copytree(ROOT / name, copy / name, ignore=ignore)
    (copy / "data").symlink_to(ROOT / "data")  # read only: the world the demo recipe names
    (copy / "docs").mkdir()
    shutil.copy(ROOT / "docs/faithfulness.md", copy / "docs")
    outside = copy / "site-packages"
    for path, table, code in doc_blocks():
        if table is None:
            target = (outside if path.startswith("my_lab/") else copy) / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(code)
        else:  # the line goes last in the table's entries, before their closing "    },"
            registry = copy / path
            text = registry.read_text()
            start = text.index(f"\n{table} = Registry(")
            end = text.index("\n    },\n)", start)
            registry.write_text(text[:end] + "\n        " + code.strip().replace("\n", "\n        ") + text[end:])
    env = {**os.environ, "PYTHONPATH": f"{copy}{os.pathsep}{outside}", "COLUMNS": "400", "NO_COLOR": "1"}
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=copy, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


def test_a_new_proposer_and_selection_rule_appear_in_every_list(followed):
    proposer = "contrast (beyond the paper): the parent beside the weakest instruction"
    selection = "uniform (beyond the paper): every alive instruction equally likely"
    for name in ("explain_proposer", "explain_selection", "ablate_help", "check", "check_outside", "plan", "study"):
        assert followed[name]["code"] == 0, (name, followed[name]["output"][-2000:])
    assert (
        "contrast    beyond the paper: the parent beside the weakest instruction"
        in followed["explain_proposer"]["output"]
    )
    assert (
        "uniform         beyond the paper: every alive instruction equally likely"
        in followed["explain_selection"]["output"]
    )
    help_text = " ".join(followed["ablate_help"]["output"].replace("│", " ").split())
    assert proposer in help_text and selection in help_text
    assert (
        "| `contrast` | beyond the paper | the parent beside the weakest instruction |  |" in followed["strategies_md"]
    )
    assert "| `uniform` | beyond the paper | every alive instruction equally likely |  |" in followed["strategies_md"]
    assert proposer in followed["reference_md"] and selection in followed["reference_md"]


def test_the_new_strategies_run_and_are_planned(followed):
    resolved = json.loads(followed["check"]["output"])
    assert (resolved["population"]["proposer"], resolved["population"]["selection"]) == ("contrast", "uniform")
    prompt = followed["contrast_prompt"]
    assert prompt.startswith("<ins_0> first instruction </ins_0>") and "second instruction" in prompt
    assert prompt.endswith("<ins_2>...</ins_2> tags.")  # the demo asks for 2 candidates per call
    assert followed["uniform"] == [1 / 3] * 3
    plan = json.loads(followed["plan"]["output"])
    variants = {v["name"]: v["overrides"] for v in plan["variants"]}
    assert variants["proposer-contrast"] == ["population.proposer=contrast"]
    assert variants["selection-uniform"] == ["population.selection=uniform"]
    assert variants["proposer-my_lab.strategies.prompt"] == ["population.proposer=my_lab.strategies:prompt"]
    # the selection study: every rule beyond the paper, the new one included, against the base (softmax's variant)
    study = {v["name"]: v["bars"] for v in json.loads(followed["study"]["output"])["variants"]}
    beyond = [f"selection-{name}" for name, rule in SELECTIONS.items() if rule.beyond_paper]
    assert [n for n in study if n.startswith("selection-")] == [*beyond, "selection-uniform"]
    assert "selection=softmax" in study["demo"]


def test_a_new_tool_appears_in_every_list_and_answers(followed):
    described = "word_count (beyond the paper): the number of words in a text"
    for name in ("explain_tools", "check_tool", "tools_plan"):
        assert followed[name]["code"] == 0, (name, followed[name]["output"][-2000:])
    assert "word_count  beyond the paper: the number of words in a text" in followed["explain_tools"]["output"]
    assert described in " ".join(followed["ablate_help"]["output"].replace("│", " ").split())
    assert "| `word_count` | beyond the paper | the number of words in a text |  |" in followed["strategies_md"]
    assert described in followed["reference_md"]
    assert json.loads(followed["check_tool"]["output"])["agent"]["tools"] == ["search", "word_count"]
    variants = {v["name"]: v["overrides"] for v in json.loads(followed["tools_plan"]["output"])["variants"]}
    assert variants["tools-search_word_count"] == ["agent.tools=['search', 'word_count']"]
    assert followed["word_count"] == ["3", "1"]


def test_a_strategy_from_an_outside_package_is_named_by_import_path(followed):
    resolved = json.loads(followed["check_outside"]["output"])
    assert resolved["population"]["proposer"] == "my_lab.strategies:prompt"
    assert followed["outside_prompt"].startswith("<ins_0> first instruction </ins_0>\n\nWrite 2 shorter versions")
