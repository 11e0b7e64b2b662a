"""Recipes: what users write in YAML and --set becomes a validated config, or a one-line error that says the fix."""

from __future__ import annotations

import pytest
import yaml

from inspo_cli.config import Recipe, RecipeError, dump_recipe, load_recipe, recipe_to_dict
from inspo_cli.config.instruction_defaults import SEARCH_R1_INSTRUCTION
from inspo_cli.registry import LOSS_TYPES, PROPOSERS, RETRIEVER_KINDS, SELECTIONS


def write(tmp_path, text, name="recipe.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "corpus.jsonl"
    path.write_text('{"id": "0", "contents": "\\"T\\"\\ntext"}\n')
    return path


@pytest.fixture
def minimal(tmp_path, corpus):
    """A recipe that needs no bundled data: trains on a named hub mixture, retrieves over a tmp corpus."""
    return write(
        tmp_path, f"data:\n  train: nq_hotpotqa\nretriever:\n  corpus: {corpus}\nevaluation:\n  benchmarks: [nq]\n"
    )


def error_of(path, overrides=()):
    with pytest.raises(RecipeError) as info:
        load_recipe(path, overrides)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_defaults_are_the_papers(minimal):
    recipe = load_recipe(minimal)
    assert (recipe.training.group_size, recipe.training.batch_size, recipe.training.mini_batch_trajectories) == (
        5,
        512,
        256,
    )
    assert (recipe.training.learning_rate, recipe.training.kl_beta, recipe.training.clip_epsilon) == (5e-7, 0.001, 0.2)
    assert (recipe.population.size, recipe.population.n_parent, recipe.population.temperature) == (7, 1, 0.2)
    assert (recipe.population.prune_every, recipe.population.evolve_every, recipe.population.evolve_until) == (
        5,
        15,
        150,
    )
    assert recipe.population.instructions == [SEARCH_R1_INSTRUCTION]
    assert (recipe.retriever.topk, recipe.rollout.max_turns, recipe.rollout.max_tokens_per_turn) == (3, 4, 500)
    t = recipe.training  # where TRL's defaults differ from eq. 2 / Search-R1's veRL, the recipe defaults to the latter
    assert (t.loss_type, t.kl_bias_correction, t.vllm_is_correction, t.entropy_coef, t.weight_decay) == (
        "grpo",
        False,
        "off",
        0.001,
        0.01,
    )
    assert (recipe.model.chat_template, recipe.rollout.end_at_eos, t.eval_every) == ("auto", False, 100)


def test_bundled_demo_recipe_is_valid(repo_root):
    recipe = load_recipe(repo_root / "recipes" / "demo.yaml")
    assert recipe.model.name_or_path == str(repo_root / "data/warm-start/smollm2-135m-world")  # found from any cwd
    assert recipe.retriever.corpus.endswith("data/world/corpus.jsonl")


def test_overrides_are_parsed_as_yaml_and_applied_last(minimal):
    recipe = load_recipe(
        minimal,
        [
            "training.learning_rate=1e-6",
            "model.lora=true",
            "evaluation.benchmarks=[nq, hotpotqa]",
            "run.name=exp1",
            "optimizer.max_calls=null",
        ],
    )
    assert recipe.training.learning_rate == 1e-6
    assert recipe.model.lora is True
    assert recipe.evaluation.benchmarks == ["nq", "hotpotqa"]
    assert recipe.run.name == "exp1"
    assert recipe.optimizer.max_calls is None


def test_pyyaml_exponent_strings_are_numbers(tmp_path, corpus):
    # PyYAML reads 5e-7 (no dot) as a string; users write it that way all the time.
    path = write(
        tmp_path,
        f"training:\n  learning_rate: 5e-7\n  steps: 3e2\nretriever:\n  corpus: {corpus}\n"
        "data:\n  train: nq_hotpotqa\nevaluation:\n  benchmarks: [nq]\n",
    )
    recipe = load_recipe(path)
    assert recipe.training.learning_rate == 5e-7 and recipe.training.steps == 300


def test_unknown_key_lists_valid_keys_and_suggests_the_closest(minimal):
    message = error_of(minimal, ["training.learnig_rate=1e-6"])
    assert message.startswith("--set training.learnig_rate: unknown key (did you mean 'learning_rate'?)")
    assert "valid keys in training:" in message and "kl_beta" in message


def test_unknown_key_in_file_names_the_file(tmp_path, minimal):
    path = write(tmp_path, minimal.read_text() + "modle:\n  lora: true\n")
    message = error_of(path)
    assert message.startswith(f"{path}: modle: unknown key (did you mean 'model'?)")


@pytest.mark.parametrize(
    "override, expected",
    [
        ("training.steps=abc", "training.steps: expected an integer, got 'abc'"),
        ("training.steps=2.5", "training.steps: expected an integer"),
        ("model.lora=maybe", "model.lora: expected true or false"),
        ("training.learning_rate=fast", "training.learning_rate: expected a finite number"),
        ("training.learning_rate=.inf", "training.learning_rate: expected a finite number"),
        ("rollout.temperature=.nan", "rollout.temperature: expected a finite number"),
        ("run.seed=-1", "run.seed: must be in [0, 2**32 - 1]"),
        ("run.seed=1180591620717411303424", "run.seed: must be in [0, 2**32 - 1]"),
        ("training=5", "training: expected a mapping of keys for training"),
        ("model.name_or_path=[a, b]", "model.name_or_path: expected a string"),
    ],
)
def test_wrong_types_are_named(minimal, override, expected):
    assert expected in error_of(minimal, [override])


@pytest.mark.parametrize(
    "override, expected",
    [
        ("training.learning_rate=-1", "--set training.learning_rate: must be > 0 (got -1.0)"),
        ("training.group_size=1", "--set training.group_size: must be >= 2"),
        (
            "training.mini_batch_trajectories=300",
            "--set training.mini_batch_trajectories: counts trajectories per "
            "optimizer update, so must divide batch_size x group_size = 2560",
        ),
        (
            "training.mini_batch_size=128",
            "--set training.mini_batch_size: renamed to training.mini_batch_trajectories, "
            "which counts trajectories per optimizer update",
        ),
        (
            "retriever.kind=elastic",
            f"--set retriever.kind: must be one of {', '.join([*RETRIEVER_KINDS, 'http'])} (got 'elastic')",
        ),
        ("population.n_parent=9", "--set population.n_parent: must be <= size (7)"),
        ("evaluation.method=cot", "--set evaluation.method: must be one of direct, rag, ircot, search-o1, agent"),
        (
            "training.loss_type=dpo",
            f"--set training.loss_type: must be one of {', '.join(LOSS_TYPES)} (got 'dpo')",
        ),
        ("training.vllm_is_correction=token", "--set training.vllm_is_correction: must be one of off, token_truncate"),
        ("population.accept=best", "--set population.accept: must be one of beat_parent, top_n (got 'best')"),
        (
            "population.selection=pareto-ucb",
            f"--set population.selection: must be one of {', '.join(SELECTIONS)} (got 'pareto-ucb')",
        ),
        ("population.epsilon=1.5", "--set population.epsilon: must be a probability in [0, 1] (got 1.5)"),
        ("population.ucb_exploration=-1", "--set population.ucb_exploration: must be >= 0 (got -1.0)"),
        ("evaluation.collapse_drop=1", "--set evaluation.collapse_drop: must be in [0, 1) (got 1.0)"),
        ("training.eval_every=-1", "--set training.eval_every: must be >= 0 (got -1)"),
    ],
)
def test_invalid_values_name_key_value_and_fix(minimal, override, expected):
    assert error_of(minimal, [override]).startswith(expected)


def test_proposer_and_method_are_checked_against_their_registries(minimal, monkeypatch):
    from inspo_cli.registry import METHODS, Strategy

    assert error_of(minimal, ["population.proposer=opro"]) == (
        f"--set population.proposer: must be one of {', '.join(PROPOSERS)} (got 'opro'); or name "
        "your own as package.module:object"
    )
    assert error_of(minimal, ["evaluation.method=rag,cot"]).startswith(
        "--set evaluation.method: must be one of direct, rag, ircot, search-o1, agent, a comma-separated list"
    )
    # a registry line is all a new strategy needs to be accepted (and listed) by the config
    monkeypatch.setitem(PROPOSERS.entries, "opro", Strategy("my_project.opro", "OPRO"))
    monkeypatch.setitem(METHODS.entries, "cot", Strategy("my_project.cot", "chain of thought"))
    recipe = load_recipe(minimal, ["population.proposer=opro", "evaluation.method=rag,cot"])
    assert (recipe.population.proposer, recipe.evaluation.method) == ("opro", "rag,cot")
    assert "opro" in error_of(minimal, ["population.proposer=nope"])


def test_an_initial_instruction_over_the_length_cap_is_refused(minimal):
    message = error_of(minimal, ["population.max_instruction_chars=10"])
    assert "population.instructions: entry 0 has 553 characters, over max_instruction_chars (10)" in message


def test_a_missing_required_field_is_attributed_to_the_file(minimal):
    message = error_of(minimal, ["retriever.kind=http"])
    assert message.startswith(f"{minimal}: retriever.url: is required when kind=http")


def test_invalid_value_in_file_names_the_file(tmp_path, minimal):
    path = write(tmp_path, minimal.read_text() + "rollout:\n  top_p: 1.5\n")
    assert error_of(path) == f"{path}: rollout.top_p: must be in (0, 1] (got 1.5)"


def test_a_pasted_api_key_is_refused_without_echoing_it(minimal):
    secret = "sk-ant-api03-SECRETSECRET"
    message = error_of(minimal, [f"optimizer.api_key_env={secret}"])
    assert "optimizer.api_key_env" in message and secret not in message


def test_missing_corpus_path_is_an_error(tmp_path):
    path = write(
        tmp_path,
        "data:\n  train: nq_hotpotqa\nretriever:\n  corpus: nowhere/corpus.jsonl\nevaluation:\n  benchmarks: [nq]\n",
    )
    message = error_of(path)
    assert message.startswith(f"{path}: retriever.corpus: path 'nowhere/corpus.jsonl' does not exist;")


@pytest.mark.parametrize(
    "override, key",
    [
        ("data.world_dir=/no/such/world", "data.world_dir"),
        ("data.train=/no/such/train.jsonl", "data.train"),
        ("retriever.index=/no/such/index", "retriever.index"),
        ("population.instruction_file=/no/such.txt", "population.instruction_file"),
    ],
)
def test_every_referenced_path_is_checked(minimal, override, key):
    overrides = [override] + (["data.train=world"] if key == "data.world_dir" else [])
    assert error_of(minimal, overrides).startswith(f"--set {key}: path ")


def test_paths_fall_back_to_the_project_checkout(tmp_path, monkeypatch, repo_root):
    monkeypatch.chdir(tmp_path)  # the bundled recipe still finds data/world from elsewhere
    recipe = load_recipe(repo_root / "recipes" / "demo.yaml")
    assert recipe.data.world_dir == str(repo_root / "data" / "world")


def test_bad_override_syntax(minimal):
    assert error_of(minimal, ["training.steps"]).startswith("--set 'training.steps': expected KEY=VALUE")
    assert error_of(minimal, ["=3"]).startswith("--set '=3': expected KEY=VALUE")


def test_missing_and_malformed_recipe_files(tmp_path):
    assert error_of(tmp_path / "nope.yaml").startswith(f"recipe {tmp_path / 'nope.yaml'} not found")
    broken = write(tmp_path, "training:\n  steps: [1, 2\n", "broken.yaml")
    assert error_of(broken).startswith(f"{broken}: line ")
    assert "invalid YAML" in error_of(broken)
    listing = write(tmp_path, "- a\n- b\n", "list.yaml")
    assert "top level must be a mapping" in error_of(listing)
    for text in ("", "# only a comment\n", "\n\n"):  # cut to nothing: not silently every default (a 3B run)
        empty = write(tmp_path, text, "empty.yaml")
        assert error_of(empty).startswith(f"{empty}: the recipe is empty; write its sections")
    assert load_recipe(write(tmp_path, "{}\n", "braces.yaml")).model.name_or_path  # written empty on purpose


def test_extends_deep_merges_and_detects_cycles(tmp_path, minimal):
    child = write(
        tmp_path, f"extends: {minimal.name}\ntraining:\n  steps: 7\npopulation:\n  enabled: true\n", "child.yaml"
    )
    recipe = load_recipe(child)
    assert recipe.training.steps == 7 and recipe.population.enabled
    assert recipe.data.train == "nq_hotpotqa"  # inherited
    write(tmp_path, "extends: b.yaml\n", "a.yaml")
    write(tmp_path, "extends: a.yaml\n", "b.yaml")
    assert "cycle" in error_of(tmp_path / "a.yaml")
    orphan = write(tmp_path, "extends: missing.yaml\n", "orphan.yaml")
    assert error_of(orphan).startswith(f"{orphan}: extends: recipe ")


def test_resolved_recipe_round_trips(tmp_path, minimal):
    recipe = load_recipe(minimal, ["training.steps=11", "population.instructions=[one, two]"])
    again = load_recipe(write(tmp_path, dump_recipe(recipe), "resolved.yaml"))
    assert again == recipe
    assert set(yaml.safe_load(dump_recipe(recipe))) == set(recipe_to_dict(Recipe()))


@pytest.mark.parametrize("value, expected", [("off", "off"), ("on", "on"), ("auto", "auto"), ("false", "off")])
def test_chat_template_accepts_bare_on_and_off(value, expected):
    # YAML 1.1 reads a bare `off` as false; the recipe means the string.
    assert load_recipe(None, [f"model.chat_template={value}"]).model.chat_template == expected


@pytest.mark.parametrize(
    "value, expected",
    [("off", "off"), ("false", "off"), ("true", "sequence_mask"), ("token_truncate", "token_truncate")],
)
def test_vllm_is_correction_accepts_bare_on_and_off(value, expected):
    assert load_recipe(None, [f"training.vllm_is_correction={value}"]).training.vllm_is_correction == expected
