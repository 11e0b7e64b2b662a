"""DAPO's dynamic sampling (`training.dynamic_sampling`): a step trains on groups whose rewards differ.

A group whose G rollouts all earn the same reward has zero advantage everywhere: it gives the policy no gradient
(only the KL and entropy terms see it). With the switch on, such groups are dropped from the step's batch and the
batch is filled from further questions, drawn at random from the training set, in at most
`training.dynamic_sampling_max_rounds` extra generation rounds. Each round asks for as many groups as are still
missing divided by the share of groups kept so far (DAPO's over-sampling), never more than one batch. If the
rounds run out, the batch is completed with dropped groups of the step's own questions (what it would have trained
on without the switch), and `dynamic_sampling/unfilled` says how many.

Dropped groups are not wasted: every round's rewards reach INSPO's instruction weights and every rollout enters
the replay buffer, exactly as the batch's own do (`SearchGRPOTrainer._calculate_rewards` runs for every round),
since an instruction under which all G rollouts fail (or all succeed) is what the weights and the reflection on
failures are about.

Processes: each one holds whole groups (`batch_plan` checks this), decides for its own groups, and every round is
run by all of them with the same number of questions, so that TRL's collective gathers line up.

    sampler = DynamicSampling(group_size=5, max_rounds=3, pad_token_id=tokenizer.pad_token_id)
    output, metrics = sampler.fill(inputs, generate, draw, reduce)
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

# the 2-D tensors of TRL's generation output that are left-padded (the prompt side); every other 2-D tensor is
# right-padded (the completion side)
PROMPT_KEYS = ("prompt_ids", "prompt_mask")
# ids take the tokenizer's pad id, the rest 0. The reference log-prob of a padded position is very low so that
# the KL term there, exp(ref - logp) - (ref - logp) - 1, stays finite whatever the policy gives the pad token (0
# there and a pad token the policy finds unlikely would be inf, and inf x mask 0 a NaN loss)
PAD_VALUES = {"tool_mask": 1, "importance_sampling_ratio": 1.0, "ref_per_token_logps": -1e4}


def informative_groups(rewards: torch.Tensor, group_size: int) -> list[bool]:
    """Per group of `group_size` consecutive rewards: do they differ (a non-zero advantage somewhere)? A reward
    that is NaN (unscorable, TRL zeroes its advantage) does not count as differing."""
    grouped = rewards.view(-1, group_size)
    nan = torch.isnan(grouped)
    spread = grouped.masked_fill(nan, -math.inf).amax(dim=1) - grouped.masked_fill(nan, math.inf).amin(dim=1)
    return [bool(value > 0) for value in spread.tolist()]  # all-NaN: -inf; one value: 0


@dataclass
class Round:
    output: dict  # what TRL's `_generate_and_score_completions` returned for this process's rows
    informative: list[bool]  # per group of this process's rows


def merge(pieces: Sequence[tuple[dict, list[int]]], pad_token_id: int) -> dict:
    """The rows `rows` of each output in `pieces`, as one output: 2-D tensors are padded to the widest (prompts
    on the left, completions on the right), 1-D tensors are concatenated. `num_items_in_batch` is left to the
    caller (it is a count over all processes)."""
    merged: dict = {}
    for key, first in pieces[0][0].items():
        if key == "num_items_in_batch":
            continue
        if not isinstance(first, torch.Tensor):
            raise ValueError(f"dynamic sampling cannot merge the generation output {key!r} (not a tensor)")
        parts = [output[key][rows] for output, rows in pieces if rows and key in output]
        if first.dim() == 2:
            width = max(part.shape[1] for part in parts)
            pad = pad_token_id if key.endswith("_ids") else PAD_VALUES.get(key, 0)
            left = key in PROMPT_KEYS
            parts = [
                torch.nn.functional.pad(
                    part, (width - part.shape[1], 0) if left else (0, width - part.shape[1]), value=pad
                )
                for part in parts
            ]
        merged[key] = torch.cat(parts, dim=0)
    return merged


def _rows(groups: list[int], group_size: int) -> list[int]:
    return [i * group_size + j for i in groups for j in range(group_size)]


def _cut(output: dict, rows: list[int]) -> dict:
    """The rows `rows` of a generation output (`num_items_in_batch`, a count over all processes, dropped)."""
    return {key: value[rows] for key, value in output.items() if key != "num_items_in_batch"}


class DynamicSampling:
    def __init__(self, group_size: int, max_rounds: int, pad_token_id: int):
        self.group_size, self.max_rounds, self.pad_token_id = group_size, max_rounds, pad_token_id

    def fill(
        self,
        inputs: list[dict],
        generate: Callable[[list[dict]], Round],
        draw: Callable[[int, int], list[dict]],
        reduce: Callable[[list[float], str], list[float]],
    ) -> tuple[dict, dict[str, float]]:
        """`generate(rows)` rolls out and scores rows (each question `group_size` times in a row); `draw(k, round)`
        gives k further questions (one row each); `reduce(values, "sum" | "max")` combines values over all
        processes. Returns the batch's output and the step's metrics."""
        g = self.group_size
        groups = len(inputs) // g
        first = generate(inputs)
        # each round is cut at once to the rows it can give the batch (memory: only these are kept until the merge);
        # the step's own rounds keep their dropped groups too, the fillers of last resort
        pieces = [(first.output, _rows([i for i, ok in enumerate(first.informative) if ok][:groups], g))]
        fillers = [i for i, ok in enumerate(first.informative) if not ok]
        kept, generated, equal, extra_rounds = sum(first.informative), groups, groups - sum(first.informative), 0
        while extra_rounds < self.max_rounds:
            (most_missing,) = reduce([groups - min(kept, groups)], "max")
            if most_missing == 0:
                break
            kept_all, generated_all = reduce([kept, generated], "sum")
            share = max(kept_all / generated_all, 1 / groups)
            size = min(groups, math.ceil(most_missing / share))
            extra_rounds += 1
            rows = draw(size, extra_rounds)
            # a dict per rollout, as TRL's sampler gives: TRL writes each rollout's own fields (its answer) into it
            round_ = generate([dict(row) for row in rows for _ in range(g)])
            chosen = [i for i, ok in enumerate(round_.informative) if ok][: max(groups - kept, 0)]
            pieces.append((_cut(round_.output, _rows(chosen, g)), list(range(len(chosen) * g))))
            kept += sum(round_.informative)
            equal += len(round_.informative) - sum(round_.informative)
            generated += size
        unfilled = groups - min(kept, groups)
        pieces.append((first.output, _rows(fillers[:unfilled], g)))
        output = merge(pieces, self.pad_token_id)
        generated_all, unfilled_all, groups_all, equal_all = reduce([generated, unfilled, groups, equal], "sum")
        metrics = {
            "dynamic_sampling/equal_generated": equal_all / generated_all,  # share of the groups the step generated
            "dynamic_sampling/extra_rollouts": (generated_all - groups_all) / groups_all,  # per rollout of the batch
            "dynamic_sampling/rounds": float(extra_rounds),
            "dynamic_sampling/unfilled": unfilled_all / groups_all,  # batch share filled with dropped groups
        }
        return output, metrics


def pooled(key: str, values: list[float], sizes: list[int], rounds: dict[str, list[float]]) -> float:
    """One value for a metric TRL logged once per generation round (`sizes`: each round's rollouts over all
    processes): the smallest of minima, the largest of maxima, a standard deviation pooled with its mean's values
    (`reward_std` with `reward`, `.../std` with `.../mean`), else the mean weighted by each round's rollouts."""
    last = key.rsplit("/", 1)[-1]
    if re.match(r"(min|max)(_|$)", last):
        finite = [v for v in values if not math.isnan(v)]
        return (min(finite) if last.startswith("min") else max(finite)) if finite else math.nan
    weights = sizes if len(values) == len(sizes) else [1] * len(values)
    mean = sum(w * v for w, v in zip(weights, values)) / sum(weights)
    partner = (
        key[: -len("_std")] if key == "reward_std" else key[: -len("/std")] + "/mean" if key.endswith("/std") else None
    )
    means = rounds.get(partner) if partner else None
    if means is None or len(means) != len(values) or len(values) != len(sizes):
        return mean
    overall = sum(w * m for w, m in zip(sizes, means)) / sum(sizes)
    # TRL's standard deviation is the sample one (Bessel's n - 1): the union's is the rounds' squares summed again
    squares = sum((w - 1) * s * s + w * (m - overall) ** 2 for w, s, m in zip(sizes, values, means))
    variance = squares / (sum(sizes) - 1)
    return math.sqrt(max(variance, 0.0))
