"""The registry is the one source of every strategy list: a strategy named by import path is validated like a name
and refused in one line, what it returns is checked at every call, and every registry shows in the help, `recipe
explain` and the reference. docs/contributing.md's worked examples are followed by test_contributing_walkthrough.py."""

from __future__ import annotations

import random
import re
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from inspo_cli.cli import app
from inspo_cli.config import load_recipe
from inspo_cli.errors import InspoError
from inspo_cli.registry import (
    ALGORITHMS,
    IMPORT_PATH_HINT,
    LOSS_TYPES,
    METHODS,
    ORIGINS,
    PARENTS,
    PROPOSERS,
    PROTOCOLS,
    REGISTRIES,
    RETRIEVER_KINDS,
    SCHEDULES,
    SELECTIONS,
    TOOLS,
)

ROOT = Path(__file__).resolve().parents[2]

# -- import paths in this process: validated like names, refused in one line ------------------------------

OUTSIDE = '''"""Two parents' worth of proposer, by import path."""

MIN_PARENTS = 2
NOT_CALLABLE = 3


def prompt(parent, population, buffer, config, rng):
    """pairs: a proposer that needs two parents."""
    return "pairs"
'''


# callables of the right signature that return what no run can use, and one that takes six arguments
SHAPES = """
import random

import numpy
from inspo_cli.evaluation.methods.base import Prediction


def six(parent, population, buffer, config, rng, extra):
    return "never called"


def returns(value):
    def strategy(*args):
        return value
    return strategy


class Selector:
    def __init__(self, chances, index):
        self.chances, self.index = chances, index

    def probabilities(self):
        return self.chances

    def draw(self, rng):
        return self.index


no_prompt, blank_prompt, a_prompt = returns(None), returns("  "), returns("the prompt")
no_selector = returns({"probabilities": [1.0]})
short_chances, nan_chances, zero_chances = (returns(Selector(c, 0)) for c in ([1.0], [float("nan"), 1.0], [0, 0]))
out_of_range, a_bool = returns(Selector([0.5, 0.5], 2)), returns(Selector([0.5, 0.5], True))
fine_selector = returns(Selector([0.25, 0.75], 1))
one_zero = returns(Selector([0, 1.0], 1))
numpy_selector = returns(Selector(numpy.array([0.25, 0.75], dtype=numpy.float32), numpy.int64(1)))


def stranger(ranked, config):
    return [object()]


def twice(ranked, config):
    return [ranked[0], ranked[0]]


def first(ranked, config):
    return ranked[:1]


no_parents, a_tuple = returns([]), returns(())


def one_short(ctx, questions):
    return [Prediction("x", "x") for _ in questions][:-1]


def strings(ctx, questions):
    return ["x" for _ in questions]


def numbers(ctx, questions):
    return [Prediction(7, "7") for _ in questions]


def predictions(ctx, questions):
    return [Prediction(q, q) for q in questions]


no_predictions, no_trainer = returns(None), returns({"trainer": "mine"})
"""


@pytest.fixture
def outside_package(tmp_path, monkeypatch):
    package = tmp_path / "lab_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "pairs.py").write_text(OUTSIDE)
    (package / "broken.py").write_text("raise RuntimeError('cannot start\\nsecond line')\n")
    (package / "exits.py").write_text("import sys\nsys.exit(3)\n")
    (package / "bad_trait.py").write_text("MIN_PARENTS = 'two'\ndef prompt(*a):\n    return ''\n")
    (package / "shapes.py").write_text(SHAPES)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [m for m in sys.modules if m.startswith("lab_pkg")]:
        monkeypatch.delitem(sys.modules, name)
    return "lab_pkg"


def test_an_import_path_carries_its_traits_and_summary(outside_package):
    strategy = PROPOSERS.resolve("lab_pkg.pairs:prompt")
    assert (strategy.origin, strategy.min_parents, strategy.summary) == (
        "outside",
        2,
        "pairs: a proposer that needs two parents.",
    )
    assert PROPOSERS.load("lab_pkg.pairs:prompt")(None, None, None, None, None) == "pairs"
    recipe = load_recipe(
        ROOT / "recipes/demo.yaml", ["population.proposer=lab_pkg.pairs:prompt", "population.n_parent=2"]
    )
    assert recipe.population.proposer == "lab_pkg.pairs:prompt"


@pytest.mark.parametrize(
    "override, message",
    [
        (
            ["population.proposer=lab_pkg.pairs:prompt"],
            "lab_pkg.pairs:prompt combines 2 parents, but population.n_parent is 1; set n_parent to 2 or more",
        ),
        (
            ["population.proposer=lab_pkg.pairs:missing"],
            "proposer lab_pkg.pairs:missing: lab_pkg.pairs has no callable 'missing' (a proposer provides prompt)",
        ),
        (["population.proposer=lab_pkg.pairs:NOT_CALLABLE"], "has no callable 'NOT_CALLABLE'"),
        (
            ["population.selection=lab_pkg.nowhere:build"],
            "selection lab_pkg.nowhere:build: cannot import lab_pkg.nowhere "
            "(ModuleNotFoundError: No module named 'lab_pkg.nowhere'); is "
            "its package installed or on PYTHONPATH?",
        ),
        (["population.parents=lab_pkg.broken:choose"], "cannot import lab_pkg.broken (RuntimeError: cannot start)"),
        (["population.proposer=lab_pkg.bad_trait:prompt"], "lab_pkg.bad_trait.MIN_PARENTS must be a int, got 'two'"),
        (["population.proposer=lab-pkg:prompt"], "'lab-pkg:prompt' is not an import path package.module:object"),
        (["population.proposer=:prompt"], "is not an import path"),
        (["population.proposer=lab_pkg.exits:prompt"], "cannot import lab_pkg.exits (SystemExit: 3)"),
        (["population.proposer=" + "x" * 1_000_000 + ":prompt"], "is not an import path"),
        (["population.selection=" + "y" * 1_000_000], "(got 'yyyyyyyyyy"),
        (["population.proposer=''"], f"must be one of {', '.join(PROPOSERS)} (got '')"),
        (["population.proposer=lab_pkg.pairs:1x"], "is not an import path"),
        (["training.algorithm=lab_pkg.nowhere:build"], "cannot import lab_pkg.nowhere"),
        (["evaluation.method=rag,lab_pkg.nowhere:predict"], "cannot import lab_pkg.nowhere"),
        # callables a run could not call as its seam does: refused when the recipe loads, not after the model did
        (
            ["population.proposer=os:getcwd"],
            "proposer os:getcwd takes (), but a proposer is called as prompt(parent, population, buffer, config, rng)",
        ),
        (["population.proposer=lab_pkg.shapes:six"], "takes (parent, population, buffer, config, rng, extra), but"),
        (
            ["population.proposer=builtins:dict"],
            "proposer builtins:dict: its signature cannot be read (a built-in?); a "
            "proposer is a Python callable prompt(parent, population, buffer, config, "
            "rng)",
        ),
        (
            ["population.selection=builtins:len"],
            "selection builtins:len takes (obj, /), but a selection is called as build(arms, config, batch)",
        ),
        (
            ["population.parents=os:getcwd"],
            "parent rule os:getcwd takes (), but a parent rule is called as choose(ranked, config)",
        ),
        (
            ["evaluation.method=os:_exit"],
            "inference method os:_exit takes (status), but an inference method is called as predict(ctx, questions)",
        ),
        (
            ["training.algorithm=os:getcwd"],
            "training algorithm os:getcwd takes (), but a training algorithm is called as build(ctx)",
        ),
    ],
)
def test_a_bad_import_path_is_one_line_naming_the_field(outside_package, override, message):
    with pytest.raises(InspoError) as info:
        load_recipe(ROOT / "recipes/demo.yaml", override)
    text = str(info.value)
    assert message in text and "\n" not in text and len(text) < 600
    assert text.startswith(f"--set {override[0].split('=')[0]}:")


def _refused(call, *fragments) -> str:
    with pytest.raises(InspoError) as info:
        call()
    text = str(info.value)
    assert all(f in text for f in fragments) and "\n" not in text and len(text) < 400, text
    return text


def test_what_an_outside_strategy_returns_is_checked_at_every_call(outside_package):
    """One line naming the import path, what came back and what a run needs, where the run would otherwise take a
    None prompt to the optimizer, zip a short list of chances against the arms, or pick an arm that is not there."""
    from inspo_cli.instructions.parents import load_parent_rule
    from inspo_cli.instructions.proposers import load_proposer
    from inspo_cli.instructions.selection import load_selection
    from inspo_cli.training.algorithms import build_trainer

    args = (None, None, None, None, None)
    assert load_proposer("lab_pkg.shapes:a_prompt")(*args) == "the prompt"
    _refused(
        lambda: load_proposer("lab_pkg.shapes:no_prompt")(*args),
        "proposer lab_pkg.shapes:no_prompt: prompt() "
        "returned None, not a non-empty str (the prompt sent to the optimizer LM) (a proposer is prompt(parent, "
        "population, buffer, config, rng))",
    )
    _refused(lambda: load_proposer("lab_pkg.shapes:blank_prompt")(*args), "returned a str '  ', not a non-empty str")

    arms = ["a", "b"]
    selector = load_selection("lab_pkg.shapes:fine_selector")(arms, None, 1)
    assert (selector.probabilities(), selector.draw(random.Random(0))) == ([0.25, 0.75], 1)
    assert load_selection("lab_pkg.shapes:one_zero")(arms, None, 1).probabilities() == [0.0, 1.0]  # 0 is a chance
    selector = load_selection("lab_pkg.shapes:numpy_selector")(arms, None, 1)  # numpy's numbers are numbers
    assert (selector.probabilities(), selector.draw(random.Random(0))) == ([0.25, 0.75], 1)
    _refused(
        lambda: load_selection("lab_pkg.shapes:no_selector")(arms, None, 1),
        "selection lab_pkg.shapes:no_selector: build() returned a dict",
        "not a Selector",
    )
    for name in ("short_chances", "nan_chances", "zero_chances"):
        _refused(
            load_selection(f"lab_pkg.shapes:{name}")(arms, None, 1).probabilities,
            f"selection lab_pkg.shapes:{name}: the selector's probabilities() returned",
            "not a list of 2 finite chances >= 0, one per arm, not all 0",
        )
    for name, shown in (("out_of_range", "an int 2"), ("a_bool", "a bool True")):
        _refused(
            lambda: load_selection(f"lab_pkg.shapes:{name}")(arms, None, 1).draw(random.Random(0)),
            f"the selector's draw() returned {shown}, not an arm's index, an int from 0 to 1",
        )

    ranked = [object(), object()]
    assert load_parent_rule("lab_pkg.shapes:first")(ranked, None) == ranked[:1]
    for name in ("stranger", "twice", "no_parents", "a_tuple"):
        _refused(
            lambda: load_parent_rule(f"lab_pkg.shapes:{name}")(ranked, None),
            f"parent rule lab_pkg.shapes:{name}: choose() returned",
            "not a non-empty list of distinct candidates taken from ranked (2 given)",
        )

    recipe = SimpleNamespace(training=SimpleNamespace(algorithm="lab_pkg.shapes:no_trainer"))
    _refused(
        lambda: build_trainer(SimpleNamespace(recipe=recipe)),
        "training algorithm lab_pkg.shapes:no_trainer: "
        "build() returned a dict {'trainer': 'mine'}, not a transformers Trainer",
    )


@pytest.mark.parametrize(
    "name, shown",
    [
        ("one_short", "a list of 1 (Prediction)"),
        ("no_predictions", "None"),
        ("strings", "a list of 2 (str)"),
        ("numbers", "a list of 2 (Prediction)"),
    ],
)
def test_an_outside_method_returns_one_prediction_per_question(outside_package, name, shown):
    from inspo_cli.evaluation.methods import get_method

    assert [p.answer for p in get_method("lab_pkg.shapes:predictions")(None, ["q1", "q2"])] == ["q1", "q2"]
    _refused(
        lambda: get_method(f"lab_pkg.shapes:{name}")(None, ["q1", "q2"]),
        f"inference method lab_pkg.shapes:{name}: predict() returned {shown}, not a list of 2 Prediction "
        "(answer: str or None, response: str), one per question, in order",
    )


def test_retriever_kinds_take_no_import_path():
    kinds = re.escape(", ".join([*RETRIEVER_KINDS, "http"]))
    with pytest.raises(InspoError, match=rf"must be one of {kinds} \(got 'my.kinds:bm25'\)$"):
        load_recipe(ROOT / "recipes/demo.yaml", ["retriever.kind=my.kinds:bm25"])


def test_an_ablation_axis_refuses_a_path_that_does_not_import(outside_package):
    result = CliRunner().invoke(
        app,
        ["ablate", "--recipe", str(ROOT / "recipes/demo.yaml"), "--selection", "lab_pkg.nowhere:build", "--dry-run"],
    )
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert (
        "--selection 'lab_pkg.nowhere:build': must be importable (selection lab_pkg.nowhere:build: cannot "
        "import lab_pkg.nowhere" in " ".join(result.output.split())
    )


def test_evaluate_method_takes_an_import_path(outside_package, tmp_path):
    from inspo_cli.commands.evaluate import parse_methods

    (tmp_path / "lab_pkg" / "echo.py").write_text("def predict(ctx, questions):\n    return []\n")
    assert parse_methods("RAG, lab_pkg.echo:predict") == ["rag", "lab_pkg.echo:predict"]
    with pytest.raises(
        InspoError, match="^--method: inference method lab_pkg.echo:nope: lab_pkg.echo has no callable 'nope'"
    ):
        parse_methods("lab_pkg.echo:nope")


# -- every list is the registry's ----------------------------------------------------------------------------


def test_every_registry_is_in_help_explain_and_the_reference():
    from inspo_cli.config.reference import explain

    reference = (ROOT / "docs/reference/recipe.md").read_text()
    runner = CliRunner()
    helps = {
        command: " ".join(
            runner.invoke(app, [*command.split(), "--help"], terminal_width=400).output.replace("│", " ").split()
        )
        for command in ("ablate", "evaluate", "train", "index")
    }
    shown_in = {
        PROPOSERS.key: "ablate",
        SELECTIONS.key: "ablate",
        PARENTS.key: "ablate",
        METHODS.key: "evaluate",
        ALGORITHMS.key: "train",
        RETRIEVER_KINDS.key: "index",
        TOOLS.key: "ablate",
        PROTOCOLS.key: "ablate",
        SCHEDULES.key: None,  # a recipe field only: its help, `recipe explain` and the reference list it
        LOSS_TYPES.key: None,
    }
    assert set(shown_in) == {registry.key for registry in REGISTRIES}
    for registry in REGISTRIES:
        text = explain(registry.key)
        for name, strategy in registry.items():
            if shown_in[registry.key] is not None:
                assert strategy.describe(name) in helps[shown_in[registry.key]], (registry.key, name)
            # its line of `recipe explain`'s choices: the name, then where it comes from and what it does
            assert re.search(
                rf"^    {re.escape(name)} +{re.escape(ORIGINS[strategy.origin])}: "
                rf"{re.escape(strategy.summary.split()[0])}",
                text,
                re.MULTILINE,
            ), (registry.key, name)
            # the page shows a <tag> in prose as &lt;tag>, so that it is not read as HTML
            assert strategy.describe(name) in " ".join(reference.replace("&lt;", "<").split()), (registry.key, name)
        assert (f"or {IMPORT_PATH_HINT}" in text) == registry.import_paths


def test_every_registered_strategy_loads_what_its_registry_promises():
    for registry in (PROPOSERS, SELECTIONS, PARENTS, METHODS, ALGORITHMS, TOOLS):
        for name in registry:
            assert callable(registry.load(name)), (registry.key, name)
            registry.check_callable(name, registry.load(name))  # the contract outside code is held to is ours
    for name in RETRIEVER_KINDS:
        assert hasattr(RETRIEVER_KINDS.load(name), "build")
    with pytest.raises(
        ValueError,
        match=rf"^unknown proposer 'opro'; registered: {re.escape(', '.join(PROPOSERS))} "
        r"\(inspo_cli.registry, population.proposer\)$",
    ):
        PROPOSERS.load("opro")
