"""`SearchGRPOTrainer`: TRL's GRPOTrainer, generating multi-turn search trajectories through the rollout engine.

It adds these things to GRPOTrainer and nothing else:
1. **Instruction per question group** — before each generation batch it asks an `InstructionSource` for one
   instruction per question (the static Search-R1 instruction, or INSPO's population), reports each group's
   mean reward back once rewards are in, and at the end of every step (after its last optimizer update) lets
   `CoEvolution` fold weights, prune and evolve; the population and replay buffer are saved in checkpoints.
   Every `training.eval_every` steps `PeriodicEvaluation` scores the policy with its best instruction.
2. **Multi-turn rollouts** through TRL's `rollout_func`: the engine interleaves generation with retrieval
   and returns the observation mask as `env_mask`, which TRL multiplies into the loss mask, so inserted
   `<information>` passages get no gradient.
3. **Search metrics**: EM, searches per trajectory, valid-action rate, prompt/response length and the share
   of observation tokens, averaged over all processes like TRL's own metrics.
4. **Phase timing**: wall seconds per logged step spent in generation, retrieval, scoring (log-probs of the
   reference/old policy and rewards) and the update (forward, backward, optimizer).

The overridden private methods (`_generate_and_score_completions`, `_calculate_rewards`, `_save_checkpoint`,
`_get_per_token_logps_and_entropies`) are why trl is pinned exactly; `tests/test_trainer.py` and
`tests/test_train_command.py` cover them.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import torch
from accelerate.utils import gather_object
from transformers import TrainerCallback
from trl import GRPOTrainer
from trl.models import unwrap_model_for_generation

from inspo_cli.agent.backends import TransformersBackend, VLLMBackend, VLLMServerBackend
from inspo_cli.agent.rollout import RolloutEngine, Trajectory, summarize
from inspo_cli.agent.tools import Tool
from inspo_cli.config import RewardConfig, RolloutConfig
from inspo_cli.instructions.replay import experiences_from
from inspo_cli.instructions.sampling import InstructionSource, Pick, derived_seed
from inspo_cli.jsonio import atomic_write_json
from inspo_cli.runs import RunDir
from inspo_cli.training.coevolution import CoEvolutionFactory, PolicyVerifier
from inspo_cli.training.dynamic_sampling import DynamicSampling, Round, informative_groups, pooled
from inspo_cli.training.generation_weights import generation_dtype, in_compute_dtype
from inspo_cli.training.periodic_eval import PeriodicEvaluation
from inspo_cli.training.reward import followed_protocol, make_reward_func
from retriever.search import Retriever

PHASES = ("generation", "retrieval", "scoring", "update")


@contextlib.contextmanager
def score_only_labelled_positions_on_cpu():
    """TRL's fused LM head scores only labelled positions (the completion) on Triton devices, but every position,
    prompt and padding included, elsewhere, to keep tile shapes fixed for compilers. Nothing is compiled on CPU,
    so score only the completion there too: the LM-head work of a CPU update shrinks to the completion tokens, and
    the log-probs are the same (each position is computed on its own; tests/test_trainer.py compares them).
    TRL reads the choice from a module-level function, so it is swapped only while this trainer computes
    log-probs, and put back after."""
    from trl.trainer import utils as trl_utils

    original = trl_utils._use_triton
    trl_utils._use_triton = lambda device: device.type == "cpu" or original(device)
    try:
        yield
    finally:
        trl_utils._use_triton = original


class SearchGRPOTrainer(GRPOTrainer):
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
    ):
        self.instructions = instructions
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
        self._generation_dtype = generation_dtype(args, self.is_deepspeed_enabled or self.is_fsdp_enabled)
        if self.use_vllm and self.vllm_mode == "colocate":  # its engine re-seeded this process with the process index
            from inspo_cli.agent.vllm_engine import reseed_after_colocated_engine

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

    def _hold_reference_in_compute_dtype(self) -> None:
        """TRL builds the KL reference with the policy's loading dtype, which is float32 when the policy keeps fp32
        master weights under bf16/fp16 autocast (`training.setup.training_precision`). The reference never trains,
        so in a one-process or DDP launch it is held in the autocast dtype (as verl holds Search-R1's reference in
        bf16), which halves its memory; it computes under the same autocast either way. ZeRO-3 holds it in bf16
        itself; FSDP shards it in float32 (computing in bf16): both are left as they are."""
        dtype = torch.bfloat16 if self.args.bf16 else torch.float16 if self.args.fp16 else None
        if (
            dtype is None
            or self.ref_model is None
            or self.is_deepspeed_enabled
            or self.is_fsdp_enabled
            or self.args.cast_lm_head_to_fp32
        ):
            return
        self.ref_model.to(dtype)

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
                informative = informative_groups(self._round_rewards, self.num_generations)
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
        self._picks = self.instructions.sample([x["qid"] for x in inputs], self.step)
        for x, pick in zip(inputs, self._picks):
            x["instruction_id"] = pick.instruction_id
        output = super()._generate_and_score_completions(inputs)
        if self.mask_truncated:  # on every process, cut rows or not: the counts are gathered
            self._mask_truncated(output)
        return Round(output, self._local_informative(len(inputs)) if self.model.training else [])

    def _mask_truncated(self, output: dict) -> None:
        """`training.mask_truncated_completions`: the truncated trajectories' rows of the loss mask (TRL's tool_mask,
        which the loss multiplies in) become 0, so they leave the loss and the token count that dapo, cispo and vespo
        divide by, as TRL's own switch does for its rows; done after TRL measured the completions' lengths, so its
        length metrics still count them."""
        rows = torch.tensor(self._truncated, dtype=torch.bool, device=output["tool_mask"].device)
        output["tool_mask"] = output["tool_mask"].masked_fill(rows.unsqueeze(1), 0)
        self._count_loss_tokens(output)

    def _say_if_emptied(self, output: dict) -> None:
        """A batch `mask_truncated_completions` left no token in the loss (every trajectory cut) trains nothing:
        said and counted (`loss/all_truncated`), never silent. Once per step, on the batch that trains (with dynamic
        sampling, the merged one: a round's cut groups may be dropped and refilled)."""
        emptied = int(output["num_items_in_batch"]) == 0
        self._metrics["train"]["loss/all_truncated"].append(float(emptied))
        if emptied and self.accelerator.is_main_process:
            from inspo_cli.progress import err_console

            err_console.print(
                f"warning: step {self.step + 1}: every trajectory of the batch was cut by a length "
                "limit and training.mask_truncated_completions leaves them out of the loss, so this "
                "batch trains nothing; raise rollout.max_total_tokens or rollout.max_tokens_per_turn, "
                "or set training.mask_truncated_completions=false",
                markup=False,
                highlight=False,
            )

    def _count_loss_tokens(self, output: dict) -> None:
        """`num_items_in_batch` again after the loss mask or the rows changed: the tokens in the loss over all
        processes, as TRL counts them (completion mask times tool mask), which dapo, cispo and vespo divide by."""
        loss_mask = output["completion_mask"] * output.get("tool_mask", 1)
        output["num_items_in_batch"] = self.accelerator.gather(loss_mask.sum()).sum()

    def _local_informative(self, rows: int) -> list[bool]:
        """Per group of this process's latest rows: do its rewards differ?"""
        index, rewards = self.accelerator.process_index, self._round_rewards
        assert rewards is not None, "rewards are set by _calculate_rewards before they are read"
        return informative_groups(rewards[index * rows : (index + 1) * rows], self.num_generations)

    def _dynamically_sampled(self, inputs) -> dict:
        """`training.dynamic_sampling`: the batch of `inputs`, less its groups of equal rewards, filled from further
        questions (`dynamic_sampling.DynamicSampling`). TRL's metrics of the rounds become one value each
        (`dynamic_sampling.pooled`): means weighted by the rollouts of each round, so that `reward` stays the mean
        over every rollout generated; the extremes of minima and maxima; standard deviations over all the rounds."""
        metrics = self._metrics["train"]
        before = {key: len(values) for key, values in metrics.items()}
        sizes: list[int] = []

        def generate(rows):
            sizes.append(len(rows) * self.accelerator.num_processes)  # TRL's metrics are over every process's rows
            return self._generate_round(rows)

        sampler = DynamicSampling(
            self.num_generations, self.dynamic_sampling_rounds, self.processing_class.pad_token_id
        )
        output, extra = sampler.fill(inputs, generate, self._further_questions, self._reduce)
        rounds = {key: values[before.get(key, 0) :] for key, values in metrics.items()}
        for key, new in rounds.items():
            if len(new) > 1:
                del metrics[key][before.get(key, 0) :]
                metrics[key].append(pooled(key, new, sizes, rounds))
        self._count_loss_tokens(output)
        for name, value in extra.items():
            metrics[name].append(value)
        metrics["groups/equal_rewards"].append(extra["dynamic_sampling/unfilled"])
        return output

    def _further_questions(self, count: int, round_: int) -> list[dict]:
        """`count` training questions at random for dynamic sampling's round `round_` of this step: a stream of its
        own, seeded by the run seed, the step, the process and the round, so a resumed run draws the same."""
        generator = random.Random(
            derived_seed(self.args.seed, "dynamic-sampling", self.step, self.accelerator.process_index, round_)
        )
        dataset = self.train_dataset
        return [dict(dataset[i]) for i in generator.choices(range(len(dataset)), k=count)]

    def _reduce(self, values: list[float], how: str) -> list[float]:
        gathered = self.accelerator.gather(torch.tensor([values], dtype=torch.float64, device=self.accelerator.device))
        combined = gathered.sum(dim=0) if how == "sum" else gathered.amax(dim=0)
        return combined.tolist()

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

    def _sync_vllm_weights(self) -> None:
        """Push the current weights into vLLM unless they are there already. TRL does this only when it generates,
        i.e. before the step's updates; verification and evaluation run after them, and would otherwise roll out
        the previous step's policy. Collective under ZeRO-3 and in server mode: every process calls it."""
        if self.state.global_step != self._last_loaded_step:
            self.vllm_generation.sync_weights()
            self._last_loaded_step = self.state.global_step

    @contextlib.contextmanager
    def _vllm_awake(self):
        """`model.vllm_enable_sleep_mode`: TRL puts its colocated engine to sleep (level 2: weights and KV cache
        freed) and wakes it inside its own `generate`, which a `rollout_func` trainer never calls; its weight sync
        wakes the weights only. So the KV cache is woken here around every rollout (training's, verification's,
        evaluation's), and the engine goes back to sleep after it, with its weights marked gone so that the next
        rollout pushes them again (level 2 discards them)."""
        generation = self.vllm_generation
        if not (self.vllm_mode == "colocate" and getattr(generation, "enable_sleep_mode", False)):
            yield
            return
        generation.llm.wake_up(tags=["kv_cache"])
        try:
            yield
        finally:
            generation.llm.sleep(level=2)
            generation._llm_weights_sleeping = True
            self._last_loaded_step = -1  # TRL's tag for "not in vLLM": the next rollout syncs the weights again

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
            rewards = torch.nansum(rewards_per_func * weights.unsqueeze(0), dim=1).view(-1, self.num_generations)
            unscorable = torch.isnan(rewards_per_func).all(dim=1).view(-1, self.num_generations)
            self._round_rewards = rewards.masked_fill(unscorable, torch.nan).flatten()  # as TRL scores them
            group_picks = picks[:: self.num_generations]
            self.instructions.observe(group_picks, rewards.mean(dim=1).tolist(), categories[:: self.num_generations])
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

    def _get_per_token_logps_and_entropies(self, *args, **kwargs):
        with score_only_labelled_positions_on_cpu() if self.compact_cpu_logprobs else contextlib.nullcontext():
            return super()._get_per_token_logps_and_entropies(*args, **kwargs)

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
