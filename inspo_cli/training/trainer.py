"""`SearchGRPOTrainer`: TRL's GRPOTrainer, generating multi-turn search trajectories through the rollout engine.

It adds these things to GRPOTrainer and nothing else:
1. **Instruction per question group** — before each generation batch it asks an `InstructionSource` for one
   instruction per question (the static Search-R1 instruction, or INSPO's population; or k per question, one per
   block of its rollouts: instruction_blocks.py), reports each group's (block's) mean reward back once rewards
   are in, and at the end of every step (after its last optimizer update) lets `CoEvolution` fold weights,
   prune and evolve; the population and replay buffer are saved in checkpoints.
   Every `training.eval_every` steps `PeriodicEvaluation` scores the policy with its best instruction.
2. **Multi-turn rollouts** through TRL's `rollout_func`: the engine interleaves generation with retrieval
   and returns the observation mask as `env_mask`, which TRL multiplies into the loss mask, so inserted
   `<information>` passages get no gradient.
3. **Search metrics**: EM, searches per trajectory, valid-action rate, prompt/response length and the share
   of observation tokens, averaged over all processes like TRL's own metrics.
4. **Phase timing**: wall seconds per logged step spent in generation, retrieval, scoring (log-probs of the
   reference/old policy and rewards) and the update (forward, backward, optimizer).

What it changes in TRL's internals, and why: trl_patches.py (`PatchedGRPOTrainer`, which it builds on);
the trainer's side of dynamic sampling: dynamic_sampling_trainer.py.
"""

from __future__ import annotations

import contextlib
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import torch
from accelerate.utils import gather_object
from transformers import TrainerCallback
from trl.models import unwrap_model_for_generation

from inspo_cli.agent.rollout import RolloutEngine, Trajectory, summarize
from inspo_cli.agent.tools import Tool
from inspo_cli.config import RewardConfig, RolloutConfig
from inspo_cli.instructions.replay import experiences_from
from inspo_cli.instructions.sampling import InstructionSource, Pick
from inspo_cli.jsonio import atomic_write_json
from inspo_cli.policy.generation_weights import generation_dtype, in_compute_dtype
from inspo_cli.policy.transformers_backend import TransformersBackend
from inspo_cli.policy.vllm_backend import VLLMBackend, VLLMServerBackend
from inspo_cli.policy.vllm_engine import reseed_after_colocated_engine
from inspo_cli.progress import err_console
from inspo_cli.runs import RunDir
from inspo_cli.training import rollout_log, rollout_traits
from inspo_cli.training.coevolution import CoEvolutionFactory, PolicyVerifier
from inspo_cli.training.dynamic_sampling import Round
from inspo_cli.training.dynamic_sampling_trainer import DynamicSamplingTrainer
from inspo_cli.training.instruction_blocks import advantage_groups, informative_questions, sample_blocks
from inspo_cli.training.periodic_eval import PeriodicEvaluation
from inspo_cli.training.reward import followed_protocol, make_reward_func
from inspo_cli.training.trl_patches import input_grads_hook_once
from retriever.search import Retriever

PHASES = ("generation", "retrieval", "scoring", "update")


class SearchGRPOTrainer(DynamicSamplingTrainer):
    def __init__(
        self,
        *,
        model,
        args,
        train_dataset,
        processing_class,
        instructions: InstructionSource,
        retriever: Retriever,
        rollout: RolloutConfig,
        reward: RewardConfig,
        topk: int = 3,
        chat: bool = True,
        updates_per_step: int = 1,
        generation_batch_size: int = 32,
        peft_config=None,
        callbacks=None,
        coevolution: CoEvolutionFactory | None = None,
        evaluation: PeriodicEvaluation | None = None,
        compact_cpu_logprobs: bool = True,
        tools: Sequence[Tool] | None = None,
        protocol: str = "search-r1",
        mask_truncated: bool = False,
        dynamic_sampling_rounds: int = 0,
        compile_generation: bool = False,
        instructions_per_question: int = 1,
        baseline: str = "question",
        save_rollouts: int | None = 0,
    ):
        self.instructions = instructions
        self.save_rollouts = save_rollouts  # run.save_rollouts: groups kept per step (None: all), rollout_log.py
        self.reward_config = reward  # what the rollout audit scores with (`rollout_traits`)
        self.group_size = args.num_generations  # TRL's num_generations, which `advantage_groups` changes for a while
        self.instructions_per_question = instructions_per_question  # population.instructions_per_question
        self.baseline = baseline  # population.baseline: question | instruction
        self._block = args.num_generations  # rows per instruction block in the latest round (instruction_blocks.py)
        self.mask_truncated = mask_truncated  # training.mask_truncated_completions
        self.dynamic_sampling_rounds = dynamic_sampling_rounds  # 0: off; else training.dynamic_sampling_max_rounds
        self._round_rewards: torch.Tensor | None = None  # the latest generation's rewards, all processes
        self._truncated: list[bool] = []  # per trajectory of the latest rollout: cut by a length limit
        self.compact_cpu_logprobs = compact_cpu_logprobs  # see `score_only_labelled_positions_on_cpu`
        self.evaluation = evaluation  # App. B: the policy with its best instruction on held-out questions, periodically
        self.updates_per_step = updates_per_step  # optimizer updates per generation batch (batch / mini-batch)
        self.phase_seconds: dict[str, float] = defaultdict(float)
        self._picks: list[Pick] = []
        self._generate_and_score_seconds = 0.0
        self._rollout_seconds = 0.0
        super().__init__(
            model=model,
            reward_funcs=[make_reward_func(reward)],
            args=args,
            train_dataset=train_dataset,
            processing_class=processing_class,
            peft_config=peft_config,
            rollout_func=self._rollout,
            callbacks=[*(callbacks or []), _StepEnd(self)],
        )
        self._hold_reference_in_compute_dtype()
        input_grads_hook_once(self.model)  # TRL toggles gradient checkpointing around every generation
        self._generation_dtype = generation_dtype(args, self.is_deepspeed_enabled or self.is_fsdp_enabled)
        if self.use_vllm and self.vllm_mode == "colocate":  # its engine re-seeded this process with the process index
            reseed_after_colocated_engine(args.seed, self.accelerator.process_index, args.vllm_tensor_parallel_size)
        self.engine = RolloutEngine(
            self._backend(rollout, generation_batch_size, compile_generation),
            retriever,
            processing_class,
            rollout,
            topk=topk,
            chat=chat,
            tools=tools,
            protocol=protocol,
        )
        # INSPO: replay buffer, pruning, evolution (None: static instruction), verifying with this trainer's policy
        self.coevolution = (
            None
            if coevolution is None
            else coevolution(PolicyVerifier(self.engine, reward, self._policy_for_generation, self.accelerator))
        )

    def _backend(self, rollout: RolloutConfig, batch_size: int, compile_generation: bool):
        if not self.use_vllm:
            # The model is swapped for its unwrapped form around every rollout (see `_policy_for_generation`).
            return TransformersBackend(
                self.model,
                self.processing_class,
                rollout.temperature,
                rollout.top_p,
                rollout.generation_batch_size or batch_size,
                fit_memory=not rollout.generation_batch_size,
                compile_generation=compile_generation,
            )
        if self.vllm_mode == "colocate":
            return VLLMBackend(self.vllm_generation.llm, rollout.temperature, rollout.top_p)
        return VLLMServerBackend(
            self.vllm_generation.vllm_client, self.processing_class, rollout.temperature, rollout.top_p
        )

    @property
    def step(self) -> int:
        """The current training step in generation batches (a step may hold several optimizer updates)."""
        return self.state.global_step // self.updates_per_step

    # -- generation ----------------------------------------------------------------------------------------

    def _generate_and_score_completions(self, inputs):
        started = time.perf_counter()
        self._rollout_seconds = 0.0
        if self.dynamic_sampling_rounds and self.model.training:
            output = self._dynamically_sampled(inputs)
        else:
            output = self._generate_round(inputs).output
            if self.model.training and self._round_rewards is not None:  # every process's groups of equal rewards
                informative = informative_questions(self._round_rewards, self.group_size, self._baseline_rows)
                self._metrics["train"]["groups/equal_rewards"].append(1 - sum(informative) / len(informative))
        if self.mask_truncated and self.model.training:
            self._say_if_emptied(output)
        elapsed = time.perf_counter() - started
        self._generate_and_score_seconds += elapsed
        self.phase_seconds["scoring"] += elapsed - self._rollout_seconds
        return output

    def _generate_round(self, inputs) -> Round:
        """One rollout of `inputs` (each question group_size times in a row), scored by TRL, with the instruction
        of each question sampled first and its group's rewards reported back (`_calculate_rewards`)."""
        keys = [x["qid"] for x in inputs]
        self._row_qids = keys  # for the rollouts kept (rollout_log.collect_rollouts)
        self._row_categories = [str(x.get("category") or "") for x in inputs]
        if self.instructions_per_question == 1:
            self._picks, self._block = self.instructions.sample(keys, self.step), self.group_size
        else:  # blocks of a group: sampled over every process's rows (instruction_blocks.py)
            self._picks, self._block = sample_blocks(
                self.instructions, keys, self.step, self.group_size, self.accelerator.process_index, gather_object
            )
        for x, pick in zip(inputs, self._picks):
            x["instruction_id"] = pick.instruction_id
        with advantage_groups(self, self._baseline_rows):
            output = super()._generate_and_score_completions(inputs)
        if self.mask_truncated:  # on every process, cut rows or not: the counts are gathered
            self._mask_truncated(output)
        return Round(output, self._local_informative(len(inputs)) if self.model.training else [])

    def _say_if_emptied(self, output: dict) -> None:
        """A batch `mask_truncated_completions` left no token in the loss (every trajectory cut) trains nothing:
        said and counted (`loss/all_truncated`), never silent. Once per step, on the batch that trains (with dynamic
        sampling, the merged one: a round's cut groups may be dropped and refilled)."""
        emptied = int(output["num_items_in_batch"]) == 0
        self._metrics["train"]["loss/all_truncated"].append(float(emptied))
        if emptied and self.accelerator.is_main_process:
            err_console.print(
                f"warning: step {self.step + 1}: every trajectory of the batch was cut by a length "
                "limit and training.mask_truncated_completions leaves them out of the loss, so this "
                "batch trains nothing; raise rollout.max_total_tokens, rollout.max_response_tokens or "
                "rollout.max_tokens_per_turn, "
                "or set training.mask_truncated_completions=false",
                markup=False,
                highlight=False,
            )

    def _rollout(self, prompts: list[str], trainer=None) -> dict:
        """TRL's rollout_func: the questions of this process's generation batch in, token ids and masks out."""
        started = time.perf_counter()
        retrieval_before = self.engine.retrieval_seconds
        with self._policy_for_generation():
            trajectories = self.engine.run([p.text for p in self._picks], prompts)
        for t in trajectories:
            if not t.completion_ids:  # a prompt that filled the context: one masked EOS keeps TRL's shapes valid
                t.append([self.processing_class.eos_token_id], 0)
        retrieval = self.engine.retrieval_seconds - retrieval_before
        seconds = time.perf_counter() - started
        self._rollout_seconds += seconds  # summed over a step's generation rounds (dynamic sampling)
        self.phase_seconds["retrieval"] += retrieval
        self.phase_seconds["generation"] += seconds - retrieval
        self._log_rollout_metrics(trajectories)
        rollout_traits.collect_rollouts(self, prompts, trajectories)  # for `inspo report --audit`
        rollout_log.collect_rollouts(self, prompts, trajectories)  # run.save_rollouts, for `inspo view`
        logprobs = [t.logprobs for t in trajectories]
        self._truncated = [t.truncated for t in trajectories]  # masked after TRL has measured the lengths
        return {
            "prompt_ids": [t.prompt_ids for t in trajectories],
            "completion_ids": [t.completion_ids for t in trajectories],
            "logprobs": None if any(lp is None for lp in logprobs) else logprobs,
            "env_mask": [t.completion_mask for t in trajectories],
            "answer": [t.answer for t in trajectories],
            "well_formed": [followed_protocol(t) for t in trajectories],
        }

    @contextlib.contextmanager
    def _policy_for_generation(self):
        if self.use_vllm:
            self._sync_vllm_weights()
            with self._vllm_awake():
                yield
            return
        with (
            unwrap_model_for_generation(
                self.model_wrapped,
                self.accelerator,
                gather_deepspeed3_params=self.args.ds3_gather_for_generation,
                gradient_checkpointing_kwargs=self.args.gradient_checkpointing_kwargs,
            ) as unwrapped,
            torch.no_grad(),
            self._dist.summon_full_params(self.model_wrapped, recurse=False),
            in_compute_dtype(unwrapped, self._generation_dtype) as policy,  # no autocast re-casting every step
            self.engine.backend.generating_with(policy),
        ):
            yield

    def _log_rollout_metrics(self, trajectories: Sequence[Trajectory]) -> None:
        for name, value in summarize(trajectories, [t.name for t in self.engine.tools]).items():
            self._log_metric(name, value)

    # -- rewards back to the instruction source --------------------------------------------------------------

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        if self.model.training:
            picks = gather_object(list(self._picks))  # every process's picks, in the order rewards were gathered
            categories = gather_object([x.get("category", "") for x in inputs])  # for parents: pareto
            weights = self.reward_weights.to(rewards_per_func.device)
            rewards = torch.nansum(rewards_per_func * weights.unsqueeze(0), dim=1).view(-1, self._block)
            unscorable = torch.isnan(rewards_per_func).all(dim=1).view(-1, self._block)
            self._round_rewards = rewards.masked_fill(unscorable, torch.nan).flatten()  # as TRL scores them
            # eq. 6: each instruction block's mean reward to its own instruction (k = 1: one block per group)
            self.instructions.observe(picks[:: self._block], rewards.mean(dim=1).tolist(), categories[:: self._block])
            if self.coevolution is not None and self.coevolution.evolving:
                self._remember(inputs, completions, rewards.flatten().tolist())
        return rewards_per_func

    def _remember(self, inputs, completions, rewards: list[float]) -> None:
        """Every rollout of the step, from all processes, into the replay buffer (Alg. 1 line 15)."""
        local = [
            (
                x["instruction_id"],
                x["qid"],
                x["prompt"],
                x["golden_answers"],
                c if isinstance(c, str) else c[-1]["content"],
            )
            for x, c in zip(inputs, completions)
        ]
        rows = gather_object(local)  # in the order the rewards were gathered
        self.coevolution.remember(experiences_from(*map(list, zip(*rows)), rewards, step=self.step + 1))

    def _end_step(self, step: int) -> None:
        """After the step's last optimizer update: fold its rewards into the instruction weights, (INSPO) prune and
        evolve as scheduled, then evaluate when due. Every process does this on the same gathered data."""
        rollout_traits.write_step(self, step)  # before evolving: the step's rows are the parents' last "before"
        rollout_log.write_step(self, step)
        if self.coevolution is None:
            self.instructions.end_step(step)
        else:
            for name, value in self.coevolution.end_step(step).items():
                self._metrics["train"][name].append(value)
        if self.evaluation is not None:
            for name, value in self.evaluation.after_step(
                step, self.engine, self._policy_for_generation, self.instructions, self.accelerator
            ).items():
                self._metrics["train"][name].append(value)

    def _save_checkpoint(self, model, trial):
        """The population goes into the checkpoint before HF writes trainer_state.json, the file whose presence
        marks a checkpoint complete, so a resumed run never finds weights without their population."""
        if self.coevolution is not None and self.args.should_save:
            folder = Path(self._get_output_dir(trial=trial)) / RunDir.checkpoint_name(self.state.global_step)
            folder.mkdir(parents=True, exist_ok=True)
            atomic_write_json(RunDir.checkpoint_coevolution(folder), self.coevolution.state_dict())
        super()._save_checkpoint(model, trial)

    # -- timing --------------------------------------------------------------------------------------------

    def training_step(self, model, inputs, num_items_in_batch):
        started, generating_before = time.perf_counter(), self._generate_and_score_seconds
        output = super().training_step(model, inputs, num_items_in_batch)
        generating = self._generate_and_score_seconds - generating_before
        self.phase_seconds["update"] += time.perf_counter() - started - generating
        return output

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if self.model.training and "loss" in logs:
            for phase in PHASES:
                logs[f"time/{phase}"] = self.phase_seconds.get(phase, 0.0)
            self.phase_seconds.clear()
        super().log(logs, start_time)


class _StepEnd(TrainerCallback):
    """Calls `SearchGRPOTrainer._end_step` once a training step's last optimizer update is done."""

    def __init__(self, trainer: SearchGRPOTrainer):
        self.trainer = trainer

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step % self.trainer.updates_per_step == 0:
            self.trainer._end_step(state.global_step // self.trainer.updates_per_step)
