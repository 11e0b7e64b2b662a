"""The plain-Python parts of training: reward, instructions, metrics file, checkpoints, the paper recipes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from inspo_cli.config import RewardConfig, dump_recipe, load_recipe
from inspo_cli.config.batch_plan import batch_plan
from inspo_cli.errors import InspoError
from inspo_cli.instructions.initial import initial_instructions
from inspo_cli.runs import RunDir
from inspo_cli.training.reward import make_reward_func, outcome_rewards


def test_outcome_reward_is_the_metric_and_format_shaping_only_lifts_wrong_well_formed_answers():
    answers = ["Ada Vell", "Paris", "Paris", None]
    gold = [["ada vell"], ["Rome"], ["Rome"], ["Rome"]]
    formed = [True, True, False, False]
    assert outcome_rewards(answers, gold, formed) == [1.0, 0.0, 0.0, 0.0]
    assert outcome_rewards(answers, gold, formed, format_weight=0.2) == [1.0, 0.2, 0.0, 0.0]
    assert outcome_rewards(["the Rome city"], [["Rome"]], [True], metric="subem") == [1.0]
    assert outcome_rewards(["Rome city"], [["Rome"]], [True], metric="f1") == [pytest.approx(2 / 3)]


def test_reward_func_reports_em_whatever_the_reward():
    logged = []
    reward = make_reward_func(RewardConfig(metric="f1", format_weight=0.1))
    values = reward(
        completions=["", ""],
        answer=["Rome city", "Rome"],
        golden_answers=[["Rome"], ["Rome"]],
        well_formed=[True, True],
        log_metric=lambda name, value: logged.append((name, value)),
    )
    assert values == [pytest.approx(2 / 3), 1.0] and logged == [("em", 0.5)]
    assert reward.__name__ == "outcome_f1"


def test_instructions_from_a_text_file_or_jsonl(tmp_path):
    recipe = load_recipe(None, check_paths=False)
    assert initial_instructions(recipe) == recipe.population.instructions
    text = tmp_path / "i.txt"
    text.write_text("  Search first, then answer.\n")
    recipe.population.instruction_file = str(text)
    assert initial_instructions(recipe) == ["Search first, then answer."]
    rows = tmp_path / "i.jsonl"
    rows.write_text(json.dumps({"text": "one"}) + "\n\n" + json.dumps({"text": "two", "id": 3}) + "\n")
    recipe.population.instruction_file = str(rows)
    assert initial_instructions(recipe) == ["one", "two"]
    rows.write_text(json.dumps({"text": "one"}) + "\n" + json.dumps({"txt": "two"}) + "\n")
    with pytest.raises(InspoError, match=r"i.jsonl:2: each line must be a JSON object with a non-empty \"text\""):
        initial_instructions(recipe)
    text.write_text("\n")
    recipe.population.instruction_file = str(text)
    with pytest.raises(InspoError, match="holds no instruction"):
        initial_instructions(recipe)


def test_resume_drops_metrics_written_after_the_checkpoint_and_a_torn_last_line(tmp_path):
    rows = [{"step": s, "update": 2 * s, "reward": s / 10} for s in range(1, 5)]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"step": 5, "upd')
    run = RunDir(tmp_path)
    assert [r["step"] for r in run.metrics()] == [1, 2, 3, 4]
    run.truncate_metrics(last_update=4)
    assert run.metrics() == rows[:2]


def test_latest_checkpoint_is_the_newest_complete_one(tmp_path):
    import torch
    from safetensors.torch import save_file

    run = RunDir(tmp_path)
    assert run.latest_checkpoint() is None
    for step, complete in ((4, True), (10, True), (12, False), (9, True)):
        path = tmp_path / "checkpoints" / f"checkpoint-{step}"
        path.mkdir(parents=True)
        if complete:
            save_file({"w": torch.zeros(4)}, str(path / "model.safetensors"))
            (path / "trainer_state.json").write_text("{}")
    assert run.latest_checkpoint().name == "checkpoint-10"  # 12 was cut off before its state was written
    assert list(run.checkpoints()) == [4, 9, 10] and RunDir.checkpoint_update(run.latest_checkpoint()) == 10


@pytest.mark.parametrize("size, lr, turns", [("3b", 5e-7, 4), ("7b", 3e-7, 6)])
def test_paper_recipes_carry_appendix_b(repo_root, size, lr, turns):
    recipe = load_recipe(repo_root / f"recipes/qwen2.5-{size}/search-r1.yaml", check_paths=False)
    t, r = recipe.training, recipe.rollout
    # Search-R1 applies the tokenizer's chat template whenever it has one (Qwen2.5 base tokenizers do; App. F shows it)
    assert recipe.model.name_or_path == f"Qwen/Qwen2.5-{size.upper()}" and recipe.model.chat_template == "auto"
    assert (t.group_size, t.batch_size, t.mini_batch_trajectories, t.steps) == (5, 512, 256, 300)
    assert (t.learning_rate, t.lr_scheduler, t.warmup_ratio, t.kl_beta, t.clip_epsilon) == (
        lr,
        "cosine",
        0.1,
        0.001,
        0.2,
    )
    assert (r.max_turns, r.max_tokens_per_turn, r.max_observation_tokens, r.max_prompt_tokens) == (
        turns,
        500,
        500,
        4096,
    )
    assert (r.temperature, r.top_p, recipe.retriever.topk, recipe.retriever.kind) == (1.0, 1.0, 3, "http")
    assert not recipe.population.enabled and recipe.data.train == "nq_hotpotqa"
    assert batch_plan(recipe, processes=8).max_updates == 3000  # 300 steps x 10 mini-batches of 256 trajectories
    assert not recipe.rollout.end_at_eos  # Search-R1: an EOS without a tag gets the corrective observation


@pytest.mark.parametrize(
    "name", ["qwen2.5-3b/search-r1", "qwen2.5-7b/search-r1", "qwen2.5-3b/inspo", "qwen2.5-7b/inspo"]
)
def test_paper_recipes_hand_trl_the_papers_values(repo_root, name):
    """TRL's own defaults differ from eq. 2 and Search-R1 (dapo loss, an importance-weighted KL, vLLM IS correction,
    no weight decay or entropy bonus): the mapping overrides each of them, and every App. B row matches."""
    from inspo_cli.training.grpo import grpo_kwargs
    from inspo_cli.training.trl_report import trl_report

    recipe = load_recipe(repo_root / f"recipes/{name}.yaml", check_paths=False)
    kwargs = grpo_kwargs(recipe, batch_plan(recipe, 8), repo_root / "runs/x", device="cuda")
    assert kwargs["loss_type"] == "grpo" and kwargs["use_bias_correction_kl"] is False
    assert kwargs["vllm_importance_sampling_correction"] is False
    assert (kwargs["entropy_coef"], kwargs["weight_decay"], kwargs["beta"]) == (0.001, 0.01, 0.001)
    report = trl_report(recipe, processes=8, device="cuda")
    assert [row["setting"] for row in report["appendix_b"] if row["matches"] is not True] == []
    config = report["grpo_config"]
    assert (
        config["loss_type"],
        config["use_bias_correction_kl"],
        config["vllm_importance_sampling_correction"],
        config["bf16"],
        config["generation_batch_size"],
    ) == ("grpo", False, False, True, 512 * 5)
    assert config["epsilon_high"] is None and config["top_k"] == 0  # None: the upper clip is epsilon too
    assert (report["population"] is not None) == name.endswith("inspo")
    # bf16 compute with float32 master weights (issue 37): the policy is loaded in float32 on every launch
    assert (config["bf16"], config["fp16"], str(config["model_init_kwargs"]["dtype"])) == (True, False, "float32")


@pytest.mark.parametrize(
    "dtype, lora, device, weights, mixed",
    [
        ("bfloat16", False, "cuda", "float32", "bf16"),
        ("bfloat16", False, "cpu", "float32", "bf16"),
        ("float16", False, "cuda", "float32", "fp16"),
        ("float32", False, "cuda", "float32", "no"),
        ("auto", False, "cuda", "float32", "bf16"),
        ("auto", False, "cpu", "float32", "no"),
        ("bfloat16", True, "cuda", "bfloat16", "bf16"),
    ],
)
def test_trained_weights_are_float32_whenever_they_train(dtype, lora, device, weights, mixed):
    """The optimizer's weights are float32 for every model.dtype; bfloat16/float16 is the autocast precision. With
    LoRA the frozen base keeps model.dtype (PEFT holds the adapters in float32)."""
    from inspo_cli.training.trainer_inputs import shared_kwargs, training_precision

    recipe = load_recipe(None, [f"model.dtype={dtype}", f"model.lora={str(lora).lower()}"], check_paths=False)
    precision = training_precision(recipe, device)
    assert (str(precision.weights).removeprefix("torch."), precision.mixed) == (weights, mixed)
    kwargs = shared_kwargs(recipe, Path("runs/x/checkpoints"), device, 10, 5)
    assert (kwargs["bf16"], kwargs["fp16"]) == (mixed == "bf16", mixed == "fp16")
    assert {k: str(v).removeprefix("torch.") for k, v in kwargs["model_init_kwargs"].items()} == {"dtype": weights}


@pytest.mark.parametrize("name", ["search-r1", "inspo", "grpo-no-search"])
@pytest.mark.parametrize("size", ["3b", "7b"])
def test_paper_recipes_make_search_r1s_ten_updates_per_step(repo_root, size, name):
    """Search-R1's train_grpo.sh (v0.2, and v0.3 whose lr App. B quotes): data.train_batch_size 512, rollout.n_agent
    5 (ray_trainer repeats the batch: 2,560 trajectories), ppo_mini_batch_size 256 (fsdp_workers: / 8 GPUs x
    rollout.n 1 = 32 per GPU; dp_actor splits each GPU's 320 into mini-batches of 32), ppo_micro_batch_size 64 (8
    per GPU): 10 optimizer updates per step, 3,000 in 300 steps, warm-up 10% of them."""
    from inspo_cli.training.grpo import grpo_kwargs
    from inspo_cli.training.trl_report import trl_report

    recipe = load_recipe(repo_root / f"recipes/qwen2.5-{size}/{name}.yaml", check_paths=False)
    t = recipe.training
    per_step = t.batch_size * t.group_size
    updates = per_step // t.mini_batch_trajectories
    assert (per_step, updates, t.steps * updates) == (2560, 10, 3000)
    for processes in (1, 8):  # the count does not depend on how many GPUs share the work
        plan = batch_plan(recipe, processes)
        assert (plan.updates_per_step, plan.max_updates) == (10, 3000)
        kwargs = grpo_kwargs(recipe, plan, repo_root / "runs/x", device="cuda")
        # TRL: one generation serves steps_per_generation micro-steps, an update every gradient_accumulation_steps
        assert kwargs["steps_per_generation"] // kwargs["gradient_accumulation_steps"] == 10
        assert kwargs["per_device_train_batch_size"] * kwargs["gradient_accumulation_steps"] * processes == 256
        assert (kwargs["max_steps"], kwargs["warmup_steps"], kwargs["logging_steps"]) == (3000, 300, 10)
        assert kwargs["save_steps"] == t.save_every * 10
    rows = {row["setting"]: row for row in trl_report(recipe, processes=8, device="cuda")["appendix_b"]}
    row = rows["optimizer updates per step (Search-R1 code)"]
    assert (row["paper"], row["recipe"], row["matches"]) == (10, 10, True)
    assert rows["micro-batch (trajectories per GPU pass)"]["matches"] is True


def test_a_run_started_with_question_mini_batches_resumes_with_its_own_schedule(tmp_path, repo_root):
    """recipe.yaml of a run started before the rename says mini_batch_size (questions): read back, it keeps the
    trajectories per update it was started with, so a resume continues the same TRL schedule."""
    old = yaml.safe_load(dump_recipe(load_recipe(repo_root / "recipes/qwen2.5-3b/search-r1.yaml", check_paths=False)))
    del old["training"]["mini_batch_trajectories"]
    old["training"]["mini_batch_size"] = 256
    run = RunDir(tmp_path / "run")
    run.path.mkdir()
    run.recipe_file.write_text(yaml.safe_dump(old), encoding="utf-8")
    recipe = run.recipe()
    assert recipe.training.mini_batch_trajectories == 1280 and batch_plan(recipe, 8).max_updates == 600
    old["training"].update(algorithm="sft", batch_size=256)
    old["model"]["backend"] = "transformers"
    run.recipe_file.write_text(yaml.safe_dump(old), encoding="utf-8")
    assert run.recipe().training.algorithm == "sft"  # SFT never used it: dropped
    with pytest.raises(InspoError, match="mini_batch_size: 256 questions was mini_batch_trajectories: 1280"):
        load_recipe(run.recipe_file, check_paths=False)  # anywhere else the old key is refused, with the conversion


@pytest.mark.parametrize("size", ["3b", "7b"])
def test_baseline_recipes_are_table_1s_rows(repo_root, size):
    """SFT and GRPO without search train the base model with Search-R1's tool-free instruction; the inference rows
    run the instruct model; SFT takes Search-R1's veRL SFT settings (the paper gives none), and so does rejection
    sampling, on what the instruct model answers right with Search-R1's search setup."""
    from inspo_cli.config.instruction_defaults import R1_INSTRUCTION
    from inspo_cli.training.sft import sft_kwargs

    load = lambda name: load_recipe(repo_root / f"recipes/qwen2.5-{size}/{name}.yaml", check_paths=False)  # noqa: E731
    base, sft, r1, inference = load("search-r1"), load("sft"), load("grpo-no-search"), load("inference")
    for recipe in (sft, r1):
        assert recipe.population.instructions == [R1_INSTRUCTION] and recipe.rollout.max_turns == 0
        assert recipe.model.name_or_path == f"Qwen/Qwen2.5-{size.upper()}" and recipe.data.train == "nq_hotpotqa"
    assert r1.training == base.training and r1.reward == base.reward  # GRPO as Search-R1, only the tool removed
    kwargs = sft_kwargs(sft, batch_plan(sft, 8), repo_root / "runs/x", device="cuda")
    assert (sft.training.algorithm, sft.data.trajectories, kwargs["max_steps"]) == ("sft", "answers", 2650)
    assert (
        kwargs["learning_rate"],
        kwargs["adam_beta2"],
        kwargs["weight_decay"],
        kwargs["warmup_steps"],
        kwargs["gradient_accumulation_steps"] * 16 * 8,
    ) == (1e-5, 0.95, 0.01, 265, 256)
    assert inference.model.name_or_path == f"Qwen/Qwen2.5-{size.upper()}-Instruct"
    assert inference.evaluation.method == "direct,rag,ircot,search-o1"
    # rejection sampling: the instruct model samples 5 per question with Search-R1's search setup, the base model
    # is fine-tuned with the SFT row's optimizer and number of updates
    rs = load("rejection-sampling")
    assert (rs.training.algorithm, rs.model.name_or_path, rs.sampling.model, rs.sampling.samples) == (
        "rejection-sampling",
        f"Qwen/Qwen2.5-{size.upper()}",
        f"Qwen/Qwen2.5-{size.upper()}-Instruct",
        5,
    )
    assert (rs.rollout, rs.retriever, rs.reward, rs.population) == (
        base.rollout,
        base.retriever,
        base.reward,
        base.population,
    )
    rs_kwargs = sft_kwargs(rs, batch_plan(rs, 8), repo_root / "runs/x", device="cuda")
    assert {
        k: v for k, v in rs_kwargs.items() if k not in ("per_device_train_batch_size", "gradient_accumulation_steps")
    } == {k: v for k, v in kwargs.items() if k not in ("per_device_train_batch_size", "gradient_accumulation_steps")}
    assert rs_kwargs["per_device_train_batch_size"] * rs_kwargs["gradient_accumulation_steps"] * 8 == 256
    assert (inference.retriever, inference.evaluation.benchmarks) == (base.retriever, base.evaluation.benchmarks)


def test_laptop_table_1_rows_differ_from_the_demo_only_where_the_row_must(repo_root):
    """bench/world_table1.py compares methods, so its recipes are the INSPO demo with one thing changed each: the
    same starting policy, retriever, reward, limits, learning rate and number of updates everywhere."""
    from dataclasses import replace

    load = lambda name: load_recipe(repo_root / f"recipes/{name}.yaml")  # noqa: E731  (paths checked too)
    demo, r1 = load("demo"), load("world-table1/search-r1")
    rows = {name: load(f"world-table1/{name}") for name in ("sft", "grpo-no-search", "rejection-sampling", "inference")}
    assert r1.population == replace(demo.population, enabled=False) and r1.training == demo.training
    for recipe in (r1, *rows.values()):
        assert (recipe.model, recipe.retriever, recipe.reward, recipe.run) == (
            demo.model,
            demo.retriever,
            demo.reward,
            demo.run,
        )
        assert (recipe.training.learning_rate, recipe.training.steps) == (demo.training.learning_rate, 8)
        assert recipe.evaluation.limit == 100 and not recipe.population.enabled
    no_tool = rows["grpo-no-search"]
    assert no_tool.rollout == replace(demo.rollout, max_turns=0) and no_tool.training == demo.training
    assert "<search>" not in no_tool.population.instructions[0] and "{question}" in no_tool.population.instructions[0]
    sft = rows["sft"]
    # its target ends at </answer> without an EOS, so its one turn ends there (the GRPO row's is generated whole)
    assert (sft.training.algorithm, sft.data.trajectories, sft.rollout, sft.population.instructions) == (
        "sft",
        "answers",
        replace(no_tool.rollout, single_turn_stop="tag"),
        no_tool.population.instructions,
    )
    rs = rows["rejection-sampling"]  # as many sampled trajectories as one GRPO run's rollouts
    assert (rs.training.algorithm, rs.rollout, rs.population.instructions) == (
        "rejection-sampling",
        demo.rollout,
        demo.population.instructions,
    )
    assert (
        rs.data.max_train_questions * rs.sampling.samples
        == demo.training.steps * demo.training.batch_size * demo.training.group_size
        and rs.sampling.model in ("", demo.model.name_or_path)
    )
    assert rows["inference"].evaluation.method == "direct,rag,ircot,search-o1,agent"
    assert rows["inference"].rollout == demo.rollout


def test_micro_batch_is_not_equivalent_under_a_token_level_loss(repo_root):
    from inspo_cli.training.trl_report import trl_report

    recipe = load_recipe(
        repo_root / "recipes/qwen2.5-3b/search-r1.yaml", ["training.loss_type=bnpo"], check_paths=False
    )
    recipe.training.micro_batch_size = 4
    rows = {row["setting"]: row["matches"] for row in trl_report(recipe, processes=8)["appendix_b"]}
    assert rows["micro-batch (trajectories per GPU pass)"] is False and rows["loss aggregation (eq. 2)"] is False
    recipe.training.loss_type = "grpo"
    rows = {row["setting"]: row["matches"] for row in trl_report(recipe, processes=8)["appendix_b"]}
    assert rows["micro-batch (trajectories per GPU pass)"] == "equivalent"  # eq. 2's gradient does not depend on it


def rows_of(rewards):
    return [{"step": i, "reward": r} for i, r in enumerate(rewards, start=1)]


def test_reward_collapse_is_a_window_mean_falling_below_a_share_of_its_peak():
    from inspo_cli.collapse import detect_collapse

    rising = [0.1, 0.2, 0.3, 0.4, 0.5, 0.5, 0.6]
    assert detect_collapse(rows_of(rising), window=3, drop=0.5) is None
    collapsed = rising + [0.3, 0.1, 0.0, 0.0]  # 3-step means: ... 0.533 (steps 5-7, the peak) ... 0.133 at step 10
    collapse = detect_collapse(rows_of(collapsed), window=3, drop=0.5)
    assert (collapse.detected_at, collapse.peak_step) == (10, 7)
    assert collapse.peak_reward == pytest.approx(1.6 / 3) and collapse.reward == pytest.approx(0.4 / 3)
    assert "step 10" in collapse.describe() and "steps up to 7" in collapse.describe()
    assert detect_collapse(rows_of(collapsed), window=3, drop=0.0) is None  # 0 turns the check off
    assert detect_collapse(rows_of(collapsed[:2]), window=3, drop=0.5) is None  # too short to judge
    assert detect_collapse(rows_of([0.0] * 12), window=3, drop=0.5) is None  # nothing to fall from
    noisy = [0.3, 0.35, 0.28, 0.33, 0.3, 0.26, 0.31]  # noise around a plateau is not a collapse
    assert detect_collapse(rows_of(noisy), window=3, drop=0.5) is None


def test_initial_rewrites_keep_every_recipe_instruction_and_fill_the_rest(monkeypatch):
    """The recipe's instructions all stay (it used to keep only the first); optimizer rewrites fill the population."""
    from types import SimpleNamespace

    from inspo_cli.instructions.providers import opening as lm
    from inspo_cli.training.coevolution import instruction_source

    class Rewriter:
        prompts: list[str] = []

        def complete(self, prompt):
            self.prompts.append(prompt)
            return (
                "<ins_1>Second one.</ins_1><ins_2>Rewrite A.</ins_2><ins_3>Rewrite B.</ins_3><ins_4>Rewrite C.</ins_4>"
            )

    rewriter = Rewriter()
    monkeypatch.setattr(lm, "open_optimizer", lambda config, record=None: rewriter)
    recipe = load_recipe(
        None,
        [
            "population.enabled=true",
            "population.initial_rewrites=true",
            "population.size=4",
            "population.instructions=[First one., Second one.]",
        ],
        check_paths=False,
    )
    population, _ = instruction_source(recipe, None, SimpleNamespace(is_main_process=True, num_processes=1))
    assert [c.text for c in population.alive()] == ["First one.", "Second one.", "Rewrite A.", "Rewrite B."]
    assert len(rewriter.prompts) == 1 and "First one." in rewriter.prompts[0]


def test_the_run_says_once_when_the_reward_collapses_also_across_a_resume(tmp_path, capsys):
    from types import SimpleNamespace

    from inspo_cli.training.run_logger import RunLogger, StepLog

    def train(rewards, first_step):
        logger = RunLogger(StepLog(RunDir(tmp_path), steps=20, collapse=(2, 0.5)), updates_per_step=1)
        state = SimpleNamespace(is_world_process_zero=True, global_step=first_step - 1)
        logger.on_train_begin(None, state, None)
        for step, reward in enumerate(rewards, start=first_step):
            state.global_step = step
            logger.on_log(None, state, None, logs={"loss": 0.0, "reward": reward})
        logger.on_train_end(None, state, None)
        return capsys.readouterr().err

    assert "collapse" not in train([0.1, 0.4, 0.6, 0.6], first_step=1)  # peak 0.6 over steps 3-4
    # resumed after step 4: the earlier rows count, so the fall at steps 5-6 is seen as the collapse it is
    output = train([0.2, 0.0, 0.0, 0.0], first_step=5)
    assert output.count("reward collapse at step 6") == 1 and "steps up to 4" in output
    assert f"inspo evaluate --run {tmp_path} --checkpoint best" in " ".join(output.split())
