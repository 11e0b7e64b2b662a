"""SearchGRPOTrainer on a tiny random Llama: the real TRL loss, real masks, a scripted policy at the backend seam."""

from __future__ import annotations

import pytest
import torch
from helpers.fake_retrievers import OverlapRetriever
from helpers.scripted_trainer import QUESTIONS, AlternatingPolicy, RecordingSource, generation_batch, tiny_recipe

from inspo_cli.config import Recipe, RewardConfig, TrainingConfig
from inspo_cli.config.batch_plan import batch_plan
from inspo_cli.instructions.sampling import StaticInstruction
from inspo_cli.metric_names import undeclared
from inspo_cli.policy.models import load_tokenizer
from inspo_cli.training.grpo import grpo_config
from inspo_cli.training.trainer import SearchGRPOTrainer
from inspo_cli.training.trainer_inputs import question_dataset


@pytest.mark.parametrize("protocol", ["search-r1", "function-calling"])
def test_observation_tokens_get_zero_gradient_and_generated_tokens_do_not(make_trainer, protocol):
    trainer = make_trainer(protocol=protocol)
    inputs = trainer._generate_and_score_completions(generation_batch())
    assert inputs["advantages"].abs().min() > 0  # right vs wrong answers within each group
    observation = {"search-r1": "<information>", "function-calling": "<tool_response>"}[protocol]
    assert all(observation in text for text in trainer.processing_class.batch_decode(inputs["completion_ids"]))

    # TRL computes log-probs with a fused LM head straight from the final hidden states, so the gradient is read
    # there: the final norm's output at position j feeds only the prediction of completion token j.
    captured = {}

    def keep_hidden(module, args, output):
        output.retain_grad()
        captured["hidden"] = output

    trainer.current_gradient_accumulation_steps = trainer.args.gradient_accumulation_steps  # set by train()
    handle = trainer.model.model.norm.register_forward_hook(keep_hidden)
    try:
        loss = trainer.compute_loss(trainer.model, inputs)
        loss.backward()
    finally:
        handle.remove()

    prompt, completion = inputs["prompt_ids"].shape[1], inputs["completion_ids"].shape[1]
    grad_per_token = captured["hidden"].grad[:, prompt - 1 : prompt - 1 + completion].abs().sum(-1)
    policy = (inputs["completion_mask"] * inputs["tool_mask"]).bool()
    observation = inputs["completion_mask"].bool() & ~inputs["tool_mask"].bool()
    assert observation.sum() > 0 and policy.sum() > 0
    assert torch.all(grad_per_token[observation] == 0)
    assert torch.all(grad_per_token[policy] > 0)


def test_scoring_only_completion_positions_on_cpu_gives_the_same_log_probs(make_trainer, monkeypatch):
    from trl.trainer import utils as trl_utils

    trainer = make_trainer()
    inputs = trainer._generate_and_score_completions(generation_batch())
    ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], dim=1)
    mask = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
    keep = inputs["completion_ids"].shape[1]

    def logps():
        with torch.no_grad():
            return trainer._get_per_token_logps_and_entropies(trainer.model, ids, mask, keep)[0]

    asked = []  # TRL's own choice is consulted only when ours does not decide (not on CPU)
    trl_choice = trl_utils._use_triton
    monkeypatch.setattr(trl_utils, "_use_triton", lambda device: asked.append(device.type) or trl_choice(device))
    spy = trl_utils._use_triton
    compact = logps()
    assert asked == [] and trl_utils._use_triton is spy  # ours decided, and only while the trainer scored
    trainer.compact_cpu_logprobs = False  # TRL's own: every position
    full = logps()
    assert asked and not any(trl_choice(torch.device(d)) for d in asked)
    scored = inputs["completion_mask"].bool()
    assert torch.allclose(compact[scored], full[scored], atol=1e-5)


def test_env_mask_marks_exactly_the_inserted_passages(make_trainer):
    trainer = make_trainer()
    inputs = trainer._generate_and_score_completions(generation_batch())
    tokenizer = trainer.processing_class
    for row in range(len(generation_batch())):
        ids = inputs["completion_ids"][row][inputs["completion_mask"][row].bool()]
        mask = inputs["tool_mask"][row][inputs["completion_mask"][row].bool()]
        inserted = tokenizer.decode(ids[mask == 0])
        generated = tokenizer.decode(ids[mask == 1])
        assert inserted.strip().startswith("<information>") and inserted.strip().endswith("</information>")
        assert "<search>" in generated and "<answer>" in generated and "<information>" not in generated


def test_instruction_is_sampled_per_question_and_rewards_go_back_per_group(make_trainer):
    source = RecordingSource("Use the search engine wisely.")
    trainer = make_trainer(source)
    inputs = trainer._generate_and_score_completions(generation_batch())
    assert source.sampled == [(["t:q1", "t:q1", "t:q2", "t:q2"], 0)]
    ((picks, rewards, categories),) = source.observed
    assert [p.instruction_id for p in picks] == ["rec", "rec"]  # one per question group
    assert categories == [q.category for q in QUESTIONS]  # each group's question category (for parents: pareto)
    assert rewards == [0.5, 0.5]  # one right, one wrong answer in each group
    trainer._end_step(1)  # what the step-end callback does after the step's last optimizer update
    assert source.ended == [1]  # the step just completed, counting from 1 as metrics.jsonl does
    prompt = trainer.processing_class.decode(inputs["prompt_ids"][0][inputs["prompt_mask"][0].bool()])
    assert "Use the search engine wisely. Question: Who founded Hokin Works?" in prompt


def test_rollout_metrics_and_phase_times_are_logged(make_trainer):
    trainer = make_trainer()
    trainer._generate_and_score_completions(generation_batch())
    metrics = trainer._metrics["train"]
    assert metrics["em"] == [0.5]
    assert metrics["search/searches_per_trajectory"] == [1.0]
    assert metrics["search/valid_action_rate"] == [1.0]
    assert 0 < metrics["length/observation_share"][0] < 1
    # Fig. 2(d) is veRL's response_length: the policy's tokens and the inserted passages
    policy, total = metrics["length/response"][0], metrics["length/response_with_observations"][0]
    assert total == pytest.approx(policy / (1 - metrics["length/observation_share"][0])) and total > policy
    assert trainer.phase_seconds["generation"] > 0 and "retrieval" in trainer.phase_seconds


def test_a_training_step_changes_every_trained_parameter(make_trainer):
    trainer = make_trainer()
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}
    trainer.train()
    changed = [n for n, p in trainer.model.named_parameters() if p.requires_grad and not torch.equal(p, before[n])]
    assert sorted(changed) == sorted(before)
    assert set(trainer.phase_seconds) == set()  # reset after the step was logged
    logged = trainer.state.log_history[0]
    assert {"time/generation", "time/retrieval", "time/scoring", "time/update", "em", "reward"} <= set(logged)
    # every name the row writes is declared (docs/reference/metrics.md); TRL's epoch is left out of the row
    assert undeclared(set(logged) - {"epoch"}) == []


def test_schedule_maps_search_r1s_batches_onto_trl(tiny_model_dir):
    """Search-R1's scripts: 512 questions x n_agent 5 = 2,560 trajectories per step, veRL mini-batches of 256
    trajectories (ppo_mini_batch_size 256 / 8 GPUs x rollout.n 1 = 32 per GPU), micro-batches of 64 / 8 GPUs = 8."""
    paper = Recipe(
        training=TrainingConfig(batch_size=512, mini_batch_trajectories=256, micro_batch_size=8, group_size=5)
    )
    plan = batch_plan(paper, processes=8)
    # 256 trajectories per update = 8 per pass x 8 GPUs x 4 accumulation steps; 2,560 / 256 = 10 updates per step
    assert (plan.updates_per_step, plan.accumulation, plan.steps_per_generation, plan.max_updates) == (10, 4, 40, 3000)
    args = grpo_config(paper, plan, tiny_model_dir / "ckpt")
    assert (
        args.per_device_train_batch_size,
        args.gradient_accumulation_steps,
        args.steps_per_generation,
        args.max_steps,
        args.warmup_steps,
    ) == (8, 4, 40, 3000, 300)
    assert (args.num_generations, args.beta, args.epsilon, args.mask_truncated_completions) == (5, 0.001, 0.2, False)


def test_micro_batch_that_does_not_divide_a_mini_batch_is_refused():
    from inspo_cli.errors import InspoError

    recipe = Recipe(training=TrainingConfig(batch_size=4, mini_batch_trajectories=16, micro_batch_size=3, group_size=4))
    with pytest.raises(InspoError, match="training.micro_batch_size=3"):
        batch_plan(recipe)


class FakeVLLMGeneration:
    """TRL's vllm_generation at the seam: counts weight syncs (no vLLM on a CPU machine)."""

    def __init__(self):
        self.syncs = 0

    def sync_weights(self):
        self.syncs += 1


def test_verification_after_the_updates_rolls_out_the_new_weights_in_vllm(make_trainer):
    """TRL syncs vLLM only when it generates, before the step's updates; evolution verifies after them. The trainer's
    generation context pushes the updated weights first, once per optimizer step, also in server mode."""
    trainer = make_trainer()
    trainer.use_vllm, trainer.vllm_generation = True, FakeVLLMGeneration()
    trainer._last_loaded_step = trainer.state.global_step  # TRL synced before the rollouts of this step
    trainer.state.global_step += 2  # the step's two optimizer updates
    with trainer._policy_for_generation():
        pass
    with trainer._policy_for_generation():  # a second rollout at the same weights: no second sync
        pass
    assert trainer.vllm_generation.syncs == 1 and trainer._last_loaded_step == trainer.state.global_step


def test_every_process_enters_generation_even_without_verification_questions():
    """Under ZeRO-3 the generation context gathers weights collectively: a rank with no share of D_B must still
    enter it, or the others hang."""
    import contextlib

    from inspo_cli.instructions.replay import ReplayQuestion
    from inspo_cli.training.coevolution import PolicyVerifier

    class SecondOfTwo:
        process_index, num_processes, device = 1, 2, torch.device("cpu")

        def reduce(self, tensor, reduction):
            assert reduction == "sum"
            return tensor + torch.tensor([[1.0], [0.0]], dtype=tensor.dtype)  # rank 0's question: rewards 1 and 0

    entered = []

    @contextlib.contextmanager
    def generation():
        entered.append(True)
        yield

    class NoRollouts:
        def run(self, instructions, questions):
            raise AssertionError("this rank has no questions to roll out")

    verifier = PolicyVerifier(NoRollouts(), RewardConfig(), generation, SecondOfTwo())
    scores = verifier.score(["parent", "candidate"], [ReplayQuestion("k", "Q?", ("a",))])  # rank 0 takes the only one
    assert entered == [True] and scores == [[1.0], [0.0]]


def test_a_bfloat16_policy_trains_with_float32_master_weights_at_the_papers_learning_rate(tmp_path, tiny_model_dir):
    """Issue 37, class 4: `model.dtype: bfloat16` at App. B's learning rate (5e-7). Held in bfloat16, a weight near
    0.02 has a spacing of about 1.2e-4, so AdamW's ~5e-7 steps would round away; the trained weights are float32
    (the master copy) under bf16 autocast on every launch, and the update lands. The reference, which never trains,
    is held in bfloat16 (as verl holds Search-R1's)."""
    import dataclasses

    recipe = tiny_recipe(tiny_model_dir, learning_rate=5e-7, kl_beta=0.001)
    recipe = dataclasses.replace(recipe, model=dataclasses.replace(recipe.model, dtype="bfloat16"))
    args = grpo_config(recipe, batch_plan(recipe), tmp_path / "checkpoints")
    assert (args.bf16, args.model_init_kwargs["dtype"]) == (True, torch.float32)
    tokenizer = load_tokenizer(recipe.model)
    trainer = SearchGRPOTrainer(
        model=str(tiny_model_dir),
        args=args,
        train_dataset=question_dataset(QUESTIONS),
        processing_class=tokenizer,
        instructions=StaticInstruction("Answer the given question."),
        retriever=OverlapRetriever(),
        rollout=recipe.rollout,
        reward=RewardConfig(),
        topk=2,
        chat=True,
    )
    trainer.engine.backend = AlternatingPolicy(tokenizer)
    assert {p.dtype for p in trainer.model.parameters()} == {torch.float32}
    assert {p.dtype for p in trainer.ref_model.parameters()} == {torch.bfloat16}
    layers = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if ".layers." in n}
    trainer.train()
    after = dict(trainer.model.named_parameters())
    moved = sum(int((after[n] != before).sum()) for n, before in layers.items())
    total = sum(before.numel() for before in layers.values())
    assert moved / total > 0.9, f"only {moved} of {total} weights moved"  # held in bfloat16: 0.8% moved
