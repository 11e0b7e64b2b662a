"""`training.algorithm: sft` (TRL's SFTTrainer) and the world's oracle trajectories: exact masks, no gradient on
observations, and `inspo train` / `--resume` / `inspo evaluate --run` on an SFT run."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers.cli_helpers import assert_one_line_error, invoke
from helpers.fake_retrievers import OverlapRetriever
from helpers.runs import metrics, resume_after_a_cut, write_recipe
from helpers.sft import (
    INSTRUCTION,
    ROLLOUT,
    assert_loss_only_on_written_tokens,
    observation_runs,
    sft_recipe,
    world_engine,
)

from inspo_cli.agent.rollout import RolloutEngine
from inspo_cli.agent.tools import ToolContext, build_tools
from inspo_cli.benchmarks import WORLD, Question, load_benchmark
from inspo_cli.config import ModelConfig
from inspo_cli.policy.models import load_tokenizer
from inspo_cli.world.oracle import coverage, oracle_trajectories
from retriever.corpus import Passage

REPO = Path(__file__).resolve().parents[2]


RELATION = re.compile(
    r" (founded|born|founder|employed|headquarters|city|capital|President|Premier|Chancellor|"
    r"Prime Minister|First Minister)$"
)


def test_world_questions_search_only_for_what_the_question_names(repo_root):
    """The oracle's first query names an entity of the question; a second one is for what the first hop found."""
    for q in load_benchmark(WORLD, "train", world_dir=repo_root / "data/world"):
        searches, hops = q.metadata["searches"], q.metadata["hops"]
        assert len(searches) == hops and all(s.strip() for s in searches)
        if q.metadata["type"] in ("single_hop", "comparison"):
            assert all(RELATION.sub("", s).removeprefix("the ") in q.question for s in searches), q
        assert not any(
            a.lower() in " ".join(searches).lower() for a in q.golden_answers if q.metadata["type"] != "comparison"
        ), q


def test_oracle_trajectories_are_grounded_and_mask_exactly_the_observations(tiny_model_dir, world_retriever):
    tokenizer = load_tokenizer(ModelConfig(name_or_path=str(tiny_model_dir)))
    questions = load_benchmark(WORLD, "train", world_dir=REPO / "data/world", limit=60)
    kept = oracle_trajectories(world_engine(tokenizer, world_retriever), INSTRUCTION, questions)
    by_type = coverage(questions, kept)
    assert all(by_type[t][0] >= 0.9 * by_type[t][1] for t in ("single_hop", "bridge", "comparison")), by_type
    for key, t in kept:
        q = next(q for q in questions if q.key == key)
        policy = tokenizer.decode([i for i, m in zip(t.completion_ids, t.completion_mask) if m])
        assert (
            policy
            == "".join(f"<search> {s} </search>" for s in q.metadata["searches"])
            + f"<answer> {q.golden_answers[0]} </answer>"
        )
        runs = observation_runs(t.completion_ids, t.completion_mask)
        assert len(runs) == q.metadata["hops"] and t.num_searches == q.metadata["hops"]
        for run in runs:
            text = tokenizer.decode(run)
            assert text.startswith("\n\n<information>") and text.endswith("</information>\n\n"), text


FOUNDINGS = [
    Passage("hokin", "Hokin Works", "Hokin Works was founded in 1913. Its hall has an iron frame."),
    Passage("ginta", "Ginta Bank", "Ginta Bank was founded in 1859. It keeps an owl."),
    Passage("orla", "Orla Mill", "Orla Mill stands by the river. Its wheel was rebuilt twice."),
]


def _founding_question(
    key: str, question: str, answer: str, searches: list[str], support: list[str], calculation: str | None = None
) -> Question:
    metadata = {
        "type": "arithmetic" if calculation else "single_hop",
        "hops": len(searches),
        "searches": searches,
        "supporting_ids": support,
        **({"calculation": calculation} if calculation else {}),
    }
    return Question(key, question, (answer,), "world", metadata)


def test_an_arithmetic_oracle_trajectory_is_kept_only_when_searches_found_both_years_and_the_calculator_ran(
    tiny_tokenizer,
):
    """The oracle writes the calculation itself, so its years are in the trajectory either way: only the observations
    count (a year no passage states leaves the question out), and the calculator's result is the answer it gives."""
    from dataclasses import replace

    from inspo_cli.world.oracle import grounded

    retriever = OverlapRetriever(FOUNDINGS)
    apart = _founding_question(
        "apart",
        "How many years apart were Hokin Works and Ginta Bank founded?",
        "54",
        ["Hokin Works founded", "Ginta Bank founded"],
        ["hokin", "ginta"],
        "1913 - 1859",
    )
    unstated = _founding_question(
        "unstated",
        "How many years apart were Hokin Works and Orla Mill founded?",
        "43",
        ["Hokin Works founded", "Orla Mill founded"],
        ["hokin", "orla"],
        "1913 - 1870",
    )
    single = _founding_question("single", "When was Ginta Bank founded?", "1859", ["Ginta Bank founded"], ["ginta"])
    questions = [apart, unstated, single]
    rollout = replace(ROLLOUT, max_turns=3, max_observation_tokens=4096, max_total_tokens=16384)
    engine = RolloutEngine(
        None,
        retriever,
        tiny_tokenizer,
        rollout,
        topk=1,
        chat=False,
        tools=build_tools(["search", "calculator"], ToolContext(retriever, 1)),
    )
    kept = dict(oracle_trajectories(engine, INSTRUCTION, questions))
    assert set(kept) == {apart.key, single.key}
    computed = kept[apart.key]
    written = tiny_tokenizer.decode([i for i, m in zip(computed.completion_ids, computed.completion_mask) if m])
    assert written.endswith("<calculate> 1913 - 1859 </calculate><answer> 54 </answer>")
    calculator_said = tiny_tokenizer.decode(observation_runs(computed.completion_ids, computed.completion_mask)[-1])
    assert calculator_said == "\n\n<information>54</information>\n\n"
    assert computed.tool_calls == {"search": 2, "calculator": 1}
    assert kept[single.key].tool_calls.get("calculator", 0) == 0  # only an arithmetic question calls it
    assert grounded(apart, computed, tiny_tokenizer)
    assert not grounded(apart, replace(computed, tool_errors={"calculator": 1}), tiny_tokenizer)
    assert not grounded(apart, replace(computed, tool_calls={"search": 2}), tiny_tokenizer)
    assert not grounded(apart, replace(computed, stop_reason="max_turns"), tiny_tokenizer)
    # without the calculator the answer, 54, is in no passage: the arithmetic question is left out
    search_only = RolloutEngine(None, retriever, tiny_tokenizer, rollout, topk=1, chat=False)
    assert [key for key, _ in oracle_trajectories(search_only, INSTRUCTION, questions)] == [single.key]


def test_sft_gives_observation_tokens_no_gradient_and_every_written_token_one(
    tmp_path, tiny_model_dir, world_retriever
):
    from inspo_cli.training.sft import sft_examples

    recipe = sft_recipe(tiny_model_dir, "world-oracle")
    tokenizer = load_tokenizer(recipe.model)
    examples = sft_examples(recipe, world_engine(tokenizer, world_retriever), INSTRUCTION)
    assert_loss_only_on_written_tokens(tmp_path, recipe, tokenizer, examples)


def test_answer_targets_are_the_first_golden_answer_after_the_evaluation_prompt(tiny_model_dir, world_retriever):
    from inspo_cli.training.sft import sft_examples

    recipe = sft_recipe(tiny_model_dir, "answers")
    tokenizer = load_tokenizer(recipe.model)
    engine = world_engine(tokenizer, world_retriever)
    questions = load_benchmark(WORLD, "train", world_dir=REPO / "data/world", limit=8)
    for q, example in zip(questions, sft_examples(recipe, engine, "Answer directly. Question: {question}\n")):
        prompt = engine.prompt_ids("Answer directly. Question: {question}\n", q.question)
        assert example["input_ids"][: len(prompt)] == prompt and not any(example["completion_mask"][: len(prompt)])
        assert tokenizer.decode(example["input_ids"][len(prompt) :]) == f"<answer> {q.golden_answers[0]} </answer>"


def test_sft_with_a_population_or_an_unknown_trajectory_source_is_a_one_line_error(tmp_path, repo_root):
    recipe = write_recipe(tmp_path, repo_root, "x", training={"algorithm": "sft"}, population={"enabled": True})
    assert_one_line_error(invoke("train", "--recipe", recipe, "--output-dir", tmp_path / "runs"), "population.enabled")
    recipe = write_recipe(tmp_path, repo_root, "x", data={"trajectories": "oracle"})
    assert_one_line_error(invoke("recipe", "check", recipe), "trajectories", "world-oracle")


@pytest.mark.slow
def test_sft_run_trains_resumes_and_is_evaluable(tmp_path, repo_root, tiny_model_dir):
    """`inspo train` with algorithm sft on the world's oracle trajectories: the usual run directory; a run cut back to
    its first checkpoint and resumed ends with the same metrics; `inspo evaluate --run` reads it."""
    recipe = write_recipe(
        tmp_path,
        repo_root,
        str(tiny_model_dir),
        data={"trajectories": "world-oracle", "max_train_questions": 16},
        rollout={"max_turns": 2, "max_observation_tokens": 256, "max_total_tokens": 768},
        training={"algorithm": "sft", "steps": 3, "batch_size": 4, "micro_batch_size": 2, "eval_every": 2},
    )
    runs = tmp_path / "runs"
    for name in ("straight", "resumed"):
        result = invoke("train", "--recipe", recipe, "--output-dir", runs, "--name", name)
        assert result.exit_code == 0, result.output
    straight, resumed = runs / "straight", runs / "resumed"
    rows = metrics(straight)
    assert [r["step"] for r in rows] == [1, 2, 3] and all(r["loss"] > 0 for r in rows)
    assert "eval/em" in rows[1] and (straight / "evaluations/step-2/results.json").is_file()
    assert (straight / "checkpoints/final/model.safetensors").is_file() and (straight / "plots/loss.png").is_file()
    summary = json.loads((straight / "summary.json").read_text())
    assert summary["steps"] == 3 and summary["overhead"] is None

    resume_after_a_cut(resumed, straight)

    result = invoke("evaluate", "--run", straight, "--limit", "2")
    assert result.exit_code == 0, result.output


def test_an_sft_batch_that_does_not_divide_is_refused_before_any_model_loads(tmp_path, repo_root):
    recipe = write_recipe(
        tmp_path, repo_root, "no-such-model", training={"algorithm": "sft", "batch_size": 4, "micro_batch_size": 3}
    )
    assert_one_line_error(
        invoke("train", "--recipe", recipe, "--output-dir", tmp_path / "runs"),
        "training.micro_batch_size=3",
        "training.batch_size=4",
    )


def test_recipe_check_trl_shows_the_sft_config(repo_root):
    recipe = repo_root / "recipes/qwen2.5-3b/sft.yaml"
    result = invoke("recipe", "check", recipe, "--trl", "--json", "--processes", "8", "--device", "cuda")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["appendix_b"] == [] and "grpo_config" not in report
    config = report["sft_config"]
    assert (config["completion_only_loss"], config["gradient_accumulation_steps"], config["adam_beta2"]) == (
        True,
        2,
        0.95,
    )
    text = invoke("recipe", "check", recipe, "--trl", "--processes", "8", "--device", "cuda")
    assert text.exit_code == 0 and "TRL SFTConfig" in text.stdout and "adam_beta1: 0.9  # TRL default" in text.stdout
