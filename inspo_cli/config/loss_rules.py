"""What a loss type asks of the other training fields, and what a recipe can run that does not measure what its
name says: the config's checks (`check_loss`, raised) and `inspo recipe check`'s warnings (`loss_warnings`), both
read from the loss types' records in `inspo_cli/registry.py` (`LOSS_TYPES`), so a new loss type needs no edit here."""

from __future__ import annotations

from typing import Any

from inspo_cli.config.validation import _require
from inspo_cli.registry import LOSS_TYPES

GSPO_CLIP = (3e-4, 4e-4)  # GSPO's clip range of the sequence ratio, low and high (GSPO v2 §5.1; TRL's paper index)
TOKEN_SCALE_CLIP = 0.01  # a clip range this wide was made for one token's ratio, not a sequence's geometric mean
# token sums that may run at sequence level, where TRL warns that they weigh each trajectory by its length
SUMMING_LOSSES = tuple(n for n, loss in LOSS_TYPES.items() if loss.divides_by_tokens and loss.level != "token")


def listed(names: list[str], last: str = "or") -> str:
    """ "a, b or c" """
    return f" {last} ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)


def dividing_by(*divisors: str) -> list[str]:
    """The loss types whose token sums are divided by one of `divisors` (keys of registry_types.DIVISORS)."""
    return [name for name, loss in LOSS_TYPES.items() if loss.divides_by in divisors]


def check_loss(t: Any, vllm_is_modes: tuple[str, ...]) -> None:
    """The rules of `t.loss_type` (a `TrainingConfig` whose loss_type is registered): the ratio level it needs, the
    clip range it reads, the cap it must have. `vllm_is_modes`: training.vllm_is_correction's choices."""
    name, loss = t.loss_type, LOSS_TYPES[t.loss_type]
    if loss.level is not None:
        _require(
            t.importance_sampling_level == loss.level,
            "importance_sampling_level",
            f"must be {loss.level} with loss_type {name} (got {t.importance_sampling_level}): set "
            f"training.importance_sampling_level={loss.level}",
        )
    if loss.level == "token":  # it forms its sequence-level weights itself, from the token ratios
        token_modes = [mode for mode in vllm_is_modes if not mode.startswith("sequence")]
        _require(
            t.vllm_is_correction in token_modes,
            "vllm_is_correction",
            f"must be {listed(token_modes)} with loss_type {name} (TRL's rule; got {t.vllm_is_correction})",
        )
    if t.clip_epsilon_high is not None:
        _require(
            0 < t.clip_epsilon_high <= 100,
            "clip_epsilon_high",
            f"must be in (0, 100] (got {t.clip_epsilon_high}), or null for clip_epsilon; DAPO uses 0.28",
        )
        _require(
            loss.clips or loss.needs_cap,
            "clip_epsilon_high",
            f"is unused by loss_type {name}, which does not clip (its gate has parameters of its own); remove it",
        )
    if loss.needs_cap:  # TRL caps the importance weight itself at epsilon_high, clip_epsilon when null
        _require(
            t.clip_epsilon_high is not None and t.clip_epsilon_high >= 1,
            "clip_epsilon_high",
            f"must be set to 1 or more with loss_type {name}, which caps each token's importance weight at it "
            f"(got {t.clip_epsilon_high}: "
            + (f"TRL would take clip_epsilon, {t.clip_epsilon}" if t.clip_epsilon_high is None else "a cap below 1")
            + ", which scales every token's gradient down); ScaleRL uses 5.0",
        )


def loss_warnings(training: Any, max_completion_tokens: int) -> list[str]:
    """What a recipe can run but does not measure what its name says, one line each (`inspo recipe check` prints
    them): TRL's warning for a sequence ratio under a loss that sums tokens, GSPO's ratio at a token's clip range,
    and an entropy bonus whose strength next to the policy loss depends on the loss_type.
    `max_completion_tokens`: what TRL's dr_grpo divides by (rollout.max_total_tokens)."""
    t, lines = training, []
    loss = LOSS_TYPES[t.loss_type]
    sequence = t.importance_sampling_level == "sequence"  # SFT keeps the RL fields at their defaults
    if sequence and loss.divides_by_tokens:  # a loss that needs token ratios never gets here
        lines.append(
            f"training.importance_sampling_level=sequence with loss_type {t.loss_type}: the loss sums "
            "per-token terms, which weighs each trajectory by its length instead of optimizing the "
            "per-sequence objective (TRL's own warning); GSPO is loss_type grpo"
        )
    widest = max(t.clip_epsilon, t.clip_epsilon_high or t.clip_epsilon)
    if sequence and loss.clips and widest >= TOKEN_SCALE_CLIP:
        low, high = (f"{bound:.0e}".replace("e-0", "e-") for bound in GSPO_CLIP)
        lines.append(
            f"training.importance_sampling_level=sequence clips one ratio per trajectory, the geometric mean "
            f"of its tokens' ratios, at clip_epsilon {t.clip_epsilon:g}"
            + (f" / clip_epsilon_high {t.clip_epsilon_high:g}" if t.clip_epsilon_high is not None else "")
            + f", a range made for one token's ratio; GSPO clips the sequence ratio at {low} / {high} (set "
            f"training.clip_epsilon={low} training.clip_epsilon_high={high})"
        )
    # the bonus is a mean over tokens; a loss divided by a constant or by nothing is not
    if t.entropy_coef > 0 and loss.divides_by in ("max_total_tokens", "nothing"):
        relative = (
            f"{max_completion_tokens:,} / L times as strong as under grpo ({max_completion_tokens / 1000:.0f}x "
            f"at L = 1,000 tokens, {max_completion_tokens / 300:.0f}x at 300)"
            if loss.divides_by == "max_total_tokens"
            else "about 1 / L as strong as under grpo (sums each trajectory's tokens)"
        )
        lines.append(
            f"training.entropy_coef {t.entropy_coef:g} with loss_type {t.loss_type}: TRL adds the bonus as a "
            f"mean over tokens for every loss type, so next to this policy loss it is {relative}, for "
            "trajectories of L tokens written by the policy; compare loss types with "
            "training.entropy_coef=0, or say so"
        )
    return lines
