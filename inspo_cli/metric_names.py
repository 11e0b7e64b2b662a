"""The names a run logs in each row of metrics.jsonl (and TensorBoard, and W&B), declared once, with what each means.

    undeclared(row)              # [] when every key of a row is declared here; else the keys that are not
    METRICS[0].name              # "step"

A name may hold a placeholder in angle brackets, matching one path segment: `tools/<tool>/calls`,
`eval/<benchmark>/em`. docs/reference/metrics.md is generated from this table (`python -m inspo_cli.docs_gen`), and
tests check that the rows a training step, a frozen-policy step and the demo log use only names declared here. Who
writes a name is said in `source`: "inspo" (`inspo_cli.agent.rollout.summarize`, the trainer, the population, the
periodic evaluation, the step logger) or "TRL" (its GRPOTrainer's and SFTTrainer's own logs, passed through).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import NamedTuple


class Metric(NamedTuple):
    name: str  # as logged; `<tool>`-like placeholders match one path segment
    group: str  # the page's section
    meaning: str
    source: str = "inspo"  # "inspo" or "TRL"


def _group(group: str, source: str, *entries: tuple[str, str]) -> tuple[Metric, ...]:
    return tuple(Metric(name, group, meaning, source) for name, meaning in entries)


METRICS: tuple[Metric, ...] = (
    *_group(
        "Every row",
        "inspo",
        ("step", "the training step, from 1 (one batch of questions, one or more optimizer updates)"),
        ("update", "TRL's optimizer updates so far (the step times the updates per step)"),
        ("time", "when the row was written, Unix seconds"),
        ("step_seconds", "wall seconds the step took"),
    ),
    *_group(
        "Reward and answers",
        "inspo",
        ("reward", "mean reward of the step's trajectories (eq. 1's outcome reward; TRL's, passed through)"),
        ("reward_std", "standard deviation of those rewards"),
        ("em", "share of trajectories whose answer matches a golden answer exactly"),
        ("groups/equal_rewards", "share of question groups whose trajectories all scored the same (no signal)"),
        ("loss/all_truncated", "1 when masking cut trajectories left no token in the loss (nothing trained)"),
    ),
    *_group(
        "Rollouts: search, tools and lengths (means per trajectory)",
        "inspo",
        ("search/searches_per_trajectory", "search calls"),
        ("search/valid_action_rate", "share of turns with a valid action"),
        ("search/answered", "share of trajectories that ended with an answer"),
        ("search/turns", "turns"),
        ("tools/<tool>/calls", "calls of the tool"),
        ("tools/<tool>/errors", "calls the tool answered with an error observation"),
        ("tools/<tool>/observation_tokens", "tokens of the tool's observations inserted into the trajectory"),
        ("length/prompt", "prompt tokens"),
        ("length/response", "tokens the policy wrote (what the loss sees)"),
        ("length/response_with_observations", "everything after the prompt, passages included (Fig. 2(d))"),
        ("length/observation_share", "share of the response that is inserted observations"),
        ("length/truncated_share", "share of trajectories cut by a length limit"),
    ),
    *_group(
        "Time per step (seconds)",
        "inspo",
        ("time/generation", "the policy generating"),
        ("time/retrieval", "the tools answering (search and others)"),
        ("time/scoring", "rewards and reference log-probabilities"),
        ("time/update", "the optimizer updates"),
        ("time/evolution", "an evolution of the population (at evolution steps)"),
        ("time/evaluation", "the periodic held-out evaluation (at its steps)"),
    ),
    *_group(
        "The instruction population (INSPO)",
        "inspo",
        ("population/size", "instructions alive"),
        ("population/pruned", "instructions pruned this step"),
        ("population/best_weight", "the highest weight"),
        ("population/prompt_length", "mean characters of the alive instructions"),
        ("population/evolved", "1 at a step that evolved"),
        ("population/proposed", "candidates the optimizer proposed (at evolution steps)"),
        ("population/accepted", "candidates that joined the population (at evolution steps)"),
        ("population/probability/<id>", "the chance instruction <id> is drawn for a group"),
        ("population/weight/<id>", "instruction <id>'s weight"),
    ),
    *_group(
        "Dynamic sampling (training.dynamic_sampling)",
        "inspo",
        ("dynamic_sampling/equal_generated", "share of the groups generated this step that had equal rewards"),
        ("dynamic_sampling/extra_rollouts", "extra rollouts per rollout of the batch"),
        ("dynamic_sampling/rounds", "extra generation rounds"),
        ("dynamic_sampling/unfilled", "share of the batch filled with dropped groups"),
    ),
    *_group(
        "Held-out evaluation (evaluation.every)",
        "inspo",
        ("eval/em", "exact match of the greedy policy with the best instruction, averaged over benchmarks"),
        ("eval/<benchmark>/em", "the same on one benchmark"),
    ),
    *_group(
        "The optimizer step (TRL)",
        "TRL",
        ("loss", "the training loss"),
        ("policy_loss", "the policy-gradient part of the loss"),
        ("grad_norm", "the gradient's global norm before clipping"),
        ("learning_rate", "the learning rate"),
        ("step_time", "TRL's own timing of the training step"),
        ("num_tokens", "tokens seen so far"),
        ("kl", "the KL divergence to the reference policy (when training.beta > 0)"),
        ("entropy", "mean entropy of the policy's tokens"),
        ("entropy_coef", "the entropy bonus's coefficient"),
        ("aux_loss", "a mixture-of-experts model's router loss"),
        ("mean_token_accuracy", "SFT: share of target tokens predicted"),
    ),
    *_group(
        "Completions and rewards (TRL)",
        "TRL",
        ("completions/mean_length", "mean tokens of a completion"),
        ("completions/min_length", "shortest completion"),
        ("completions/max_length", "longest completion"),
        ("completions/clipped_ratio", "share of completions that did not end with EOS"),
        ("completions/mean_terminated_length", "mean length of the completions that ended with EOS"),
        ("completions/min_terminated_length", "shortest of those"),
        ("completions/max_terminated_length", "longest of those"),
        ("rewards/<reward>/mean", "mean of one reward function"),
        ("rewards/<reward>/std", "its standard deviation"),
        ("frac_reward_zero_std", "share of groups whose rewards do not vary"),
    ),
    *_group(
        "Clipping and importance sampling (TRL)",
        "TRL",
        ("clip_ratio/low_mean", "share of tokens clipped below 1 - epsilon"),
        ("clip_ratio/low_min", "the smallest such share over processes"),
        ("clip_ratio/high_mean", "share of tokens clipped above 1 + epsilon_high"),
        ("clip_ratio/high_max", "the largest such share over processes"),
        ("clip_ratio/region_mean", "share of tokens clipped either way"),
        ("cispo_clip_ratio", "cispo: share of importance weights clipped"),
        ("vespo/phi_seq_mean", "vespo: mean of the trajectories' weights"),
        ("sampling/sampling_logp_difference/mean", "vLLM: mean gap between generation and training log-probs"),
        ("sampling/sampling_logp_difference/max", "vLLM: the largest such gap"),
        ("sampling/importance_sampling_ratio/min", "vLLM: smallest importance-sampling correction"),
        ("sampling/importance_sampling_ratio/mean", "vLLM: mean importance-sampling correction"),
        ("sampling/importance_sampling_ratio/max", "vLLM: largest importance-sampling correction"),
    ),
)


def _pattern(name: str) -> str:
    return "/".join("[^/]+" if re.fullmatch(r"<\w+>", part) else re.escape(part) for part in name.split("/"))


DECLARED = re.compile("|".join(f"(?:{_pattern(metric.name)})" for metric in METRICS))


def undeclared(keys: Iterable[str]) -> list[str]:
    """The keys (of a logged row) that no declared name matches, sorted."""
    return sorted(key for key in keys if not DECLARED.fullmatch(key))
