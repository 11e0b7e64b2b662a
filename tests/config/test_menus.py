"""Every menu is one table: a field of fixed choices lists in its help exactly what its check accepts, and a loss type,
a call protocol or a rollout schedule is a registry record whose traits drive the config's checks, `recipe check`'s
warnings and `recipe check --trl`'s rows, so a new one is a line in `inspo_cli/registry.py` and nothing else."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pytest

from inspo_cli.config import RecipeError, load_recipe
from inspo_cli.config.loss_rules import SUMMING_LOSSES, loss_warnings
from inspo_cli.config.reference import sections
from inspo_cli.config.validation import ConfigValueError, check_choices, choice_field
from inspo_cli.registry import LOSS_TYPES, PROTOCOLS, SCHEDULES, LossType, Strategy


def choice_fields():
    for section, _, cls in sections():
        for f in dataclasses.fields(cls):
            if "choices" in f.metadata:
                yield f"{section}.{f.name}", f


def test_a_choice_field_lists_what_its_check_accepts():
    @dataclass
    class Section:
        mode: str = choice_field({"fast": "fewer checks", "safe": ""}, "safe", "How to run: {choices}.")

        def __post_init__(self):
            check_choices(self)

    help_text = Section.__dataclass_fields__["mode"].metadata["help"]
    assert help_text == "How to run: fast (fewer checks) | safe."
    assert Section("fast").mode == "fast"
    with pytest.raises(ConfigValueError, match=r"^must be one of fast, safe \(got 'slow'\)$"):
        Section("slow")
    with pytest.raises(ValueError, match="the default 'auto' must be a choice"):
        choice_field(("on", "off"), "auto", "{choices}")
    with pytest.raises(ValueError, match="the help must say"):
        choice_field(("on", "off"), "on", "on or off")


def test_every_fixed_menu_of_the_recipe_is_one_tuple():
    keys = [key for key, _ in choice_fields()]
    assert len(keys) >= 17 and "training.scale_rewards" in keys and "population.leak_check" in keys
    for key, f in choice_fields():
        shown = f.metadata["help"]
        # the help names every choice, in the check's order, joined by " | "
        first, *rest = f.metadata["choices"]
        positions = [shown.find(first), *(shown.find(f" | {name}") for name in rest)]
        assert -1 not in positions and positions == sorted(positions), key
        assert f.default in f.metadata["choices"], key
        with pytest.raises(RecipeError, match=f"{key}: must be one of {', '.join(f.metadata['choices'])}"):
            load_recipe(None, [f"{key}=not-a-choice"])


def test_the_summing_losses_are_the_records_that_divide_by_tokens_at_either_level():
    assert SUMMING_LOSSES == ("bnpo", "dr_grpo", "dapo", "cispo")  # TRL 1.16's own warning list
    assert [name for name, loss in LOSS_TYPES.items() if loss.level] == ["luspo", "vespo"]


def test_a_loss_type_is_one_record_whose_traits_are_checked(monkeypatch):
    monkeypatch.setitem(
        LOSS_TYPES.entries,
        "capped",
        LossType("a toy loss", "nowhere", level="sequence", clips=False, needs_cap=True, divides_by="nothing"),
    )
    monkeypatch.setitem(LOSS_TYPES.entries, "gated", LossType("a toy gate", "nowhere", level="token", clips=False))
    with pytest.raises(RecipeError, match="training.importance_sampling_level: must be sequence with loss_type capped"):
        load_recipe(None, ["training.loss_type=capped"])
    with pytest.raises(RecipeError, match="clip_epsilon_high: must be set to 1 or more with loss_type capped"):
        load_recipe(None, ["training.loss_type=capped", "training.importance_sampling_level=sequence"])
    training = load_recipe(
        None,
        ["training.loss_type=capped", "training.importance_sampling_level=sequence", "training.clip_epsilon_high=5"],
    ).training
    # no PPO clip, so no GSPO clip-range warning; a sum per trajectory, so the entropy bonus is off scale
    (warning,) = loss_warnings(training, 8192)
    assert "training.entropy_coef 0.001 with loss_type capped" in warning and "about 1 / L" in warning
    with pytest.raises(RecipeError, match="clip_epsilon_high: is unused by loss_type gated, which does not clip"):
        load_recipe(None, ["training.loss_type=gated", "training.clip_epsilon_high=0.28"])
    with pytest.raises(
        RecipeError, match="vllm_is_correction: must be off, token_truncate or token_mask with loss_type gated"
    ):
        load_recipe(None, ["training.loss_type=gated", "training.vllm_is_correction=sequence_truncate"])
    with pytest.raises(RecipeError, match="importance_sampling_level: must be token with loss_type gated"):
        load_recipe(None, ["training.loss_type=gated", "training.importance_sampling_level=sequence"])


def test_a_clipping_loss_at_sequence_level_is_warned_about_gspo_clip_range():
    training = load_recipe(None, ["training.loss_type=bnpo", "training.importance_sampling_level=sequence"]).training
    warned = loss_warnings(training, 8192)
    assert len(warned) == 2 and "loss_type bnpo: the loss sums per-token terms" in warned[0]
    assert "GSPO clips the sequence ratio at 3e-4 / 4e-4" in warned[1]
    sapo = load_recipe(None, ["training.loss_type=sapo", "training.importance_sampling_level=sequence"]).training
    assert loss_warnings(sapo, 8192) == []  # a gate, not a clip: no clip range to be wrong


def test_a_protocol_or_schedule_trait_is_what_the_recipe_check_asks(monkeypatch):
    monkeypatch.setitem(
        PROTOCOLS.entries,
        "toy-calls",
        Strategy("inspo_cli.agent.call_formats:FunctionCallingFormat", "toy", "beyond", chat_template=True),
    )
    with pytest.raises(
        RecipeError,
        match=r"agent.protocol: is toy-calls, which writes its prompts through a chat "
        r"template, but model.chat_template is off: set model.chat_template=auto \(or "
        r"agent.protocol=search-r1\)",
    ):
        load_recipe(None, ["agent.protocol=toy-calls", "model.chat_template=off"])
    monkeypatch.setitem(SCHEDULES.entries, "eager", Strategy("inspo_cli.agent.rollout", "toy", "beyond"))
    assert load_recipe(None, ["rollout.schedule=eager"]).rollout.schedule == "eager"
    monkeypatch.setitem(
        SCHEDULES.entries, "streamed", Strategy("inspo_cli.agent.per_trajectory", "toy", "beyond", vllm_engine=True)
    )
    with pytest.raises(
        RecipeError,
        match=r"rollout.schedule: is streamed, which drives a vLLM engine request by "
        r"request: it needs model.backend=vllm .*; or set rollout.schedule=turn-synchronous",
    ):
        load_recipe(None, ["rollout.schedule=streamed"])


def test_the_protocol_is_built_from_its_record(tiny_tokenizer):
    from inspo_cli.agent.call_formats import FunctionCallingFormat, SearchR1Format, call_format

    assert type(call_format("search-r1", [], tiny_tokenizer, chat=False)) is SearchR1Format
    assert type(call_format("function-calling", [], tiny_tokenizer, chat=True)) is FunctionCallingFormat
    with pytest.raises(Exception, match="agent.protocol: 'hermes' is not one of search-r1, function-calling"):
        call_format("hermes", [], tiny_tokenizer, chat=False)


def test_the_trl_report_names_the_cap_and_the_scales_from_the_records(repo_root):
    from inspo_cli.training.trl_report import trl_report

    recipe = load_recipe(
        repo_root / "recipes/qwen2.5-3b/search-r1.yaml",
        ["training.loss_type=cispo", "training.clip_epsilon_high=5"],
        check_paths=False,
    )
    rows = {row["setting"]: row for row in trl_report(recipe, processes=8)["appendix_b"]}
    assert rows["upper clip epsilon_high"]["note"] == "CISPO's cap of the importance weight"
    assert (
        rows["advantage scaling"]["note"] == "reward minus the group mean, divided by the std of: group | batch | none"
    )
    assert rows["micro-batch (trajectories per GPU pass)"]["note"].startswith("with loss_type grpo, sapo or luspo (")


def test_an_outside_module_declares_only_the_traits_its_registry_reads(tmp_path, monkeypatch):
    from inspo_cli.registry import PROPOSERS

    (tmp_path / "lab_prompts.py").write_text(
        'CHAT_TEMPLATE = "{{ messages }}"  # its own constant, not a protocol trait\nMIN_PARENTS = 2\n\n\n'
        'def prompt(parent, population, buffer, config, rng):\n    """pairs of parents."""\n    return "x"\n'
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    strategy = PROPOSERS.resolve("lab_prompts:prompt")
    assert (strategy.min_parents, strategy.chat_template, strategy.summary) == (2, False, "pairs of parents.")
