"""TransformersBackend on a tiny random model: exact ids, per-row budgets, stop strings, padding-independence."""

from __future__ import annotations

import pytest
import torch
from helpers.fake_retrievers import OverlapRetriever

from inspo_cli.agent import RolloutEngine
from inspo_cli.config import ModelConfig, RolloutConfig
from inspo_cli.policy.models import load_model
from inspo_cli.policy.transformers_backend import TransformersBackend


@pytest.fixture(scope="module")
def tiny(tiny_model_dir):
    return load_model(ModelConfig(name_or_path=str(tiny_model_dir), dtype="float32"), device="cpu")


def greedy(tiny, batch_size=8):
    model, tokenizer = tiny
    return TransformersBackend(model, tokenizer, temperature=0.0, batch_size=batch_size)


def contexts(tokenizer):
    return [
        tokenizer.encode(text)
        for text in [
            "who founded Hokin Works?",
            "the river",
            "Answer the given question. Question: when was the castle built?",
        ]
    ]


def test_greedy_tokens_are_the_models_argmax_one_by_one(tiny):
    model, tokenizer = tiny
    ctx = contexts(tokenizer)
    generations = greedy(tiny).generate(ctx, [12, 12, 12])
    for context, generation in zip(ctx, generations):
        ids = torch.tensor([context + generation.token_ids])
        with torch.no_grad():
            logits = model(ids).logits[0]
        predicted = logits[len(context) - 1 : -1].argmax(-1).tolist()  # unpadded, one forward pass
        assert generation.token_ids == predicted


def test_batched_and_left_padded_equals_one_at_a_time(tiny):
    _, tokenizer = tiny
    ctx = contexts(tokenizer)
    together = greedy(tiny, batch_size=8).generate(ctx, [10, 5, 8])
    alone = greedy(tiny, batch_size=1).generate(ctx, [10, 5, 8])
    assert [g.token_ids for g in together] == [g.token_ids for g in alone]
    assert [len(g.token_ids) for g in together] == [10, 5, 8]
    assert {g.finish for g in together} == {"length"}


def test_a_row_stops_right_after_its_stop_string(tiny):
    _, tokenizer = tiny
    ctx = contexts(tokenizer)
    free = greedy(tiny).generate(ctx, [20, 20, 20])
    target = free[0].token_ids
    stop = tokenizer.decode(target[4:7])  # text the model is known to produce, ending at a token boundary
    assert stop.strip(), "the tiny model produced only whitespace; pick another seed"
    first_end = next(n for n in range(1, 21) if stop in tokenizer.decode(target[:n]))
    stopped = greedy(tiny).generate(ctx, [20, 20, 20], stop=[stop])
    assert stopped[0].token_ids == target[:first_end] and stopped[0].finish == "stop"
    for other, reference in zip(stopped[1:], free[1:]):  # rows without the string are untouched
        assert reference.token_ids[: len(other.token_ids)] == other.token_ids


def test_engine_with_a_real_model_keeps_lengths_and_masks_consistent(tiny):
    model, tokenizer = tiny
    torch.manual_seed(0)
    backend = TransformersBackend(model, tokenizer, temperature=1.0, batch_size=4)
    config = RolloutConfig(
        max_turns=2, max_tokens_per_turn=24, max_observation_tokens=64, max_prompt_tokens=256, max_total_tokens=200
    )
    engine = RolloutEngine(backend, OverlapRetriever(), tokenizer, config, topk=2, chat=True)
    trajectories = engine.run(["Answer the given question."] * 6, [f"question {i}?" for i in range(6)])
    for t in trajectories:
        assert len(t.completion_ids) == len(t.completion_mask)
        assert len(t.prompt_ids) + len(t.completion_ids) <= 200
        assert t.stop_reason in ("answer", "eos", "max_turns", "context")
        assert sum(t.completion_mask) >= 1 and t.turns >= 1


class Spy:
    """Wraps a real backend and records what it returned for each context."""

    def __init__(self, backend):
        self.backend, self.returned = backend, []

    def generate(self, contexts, max_new_tokens, stop=()):
        generations = self.backend.generate(contexts, max_new_tokens, stop)
        self.returned.extend((list(c), g.token_ids) for c, g in zip(contexts, generations))
        return generations


def test_a_random_model_gets_corrected_until_max_turns_and_masks_match_what_it_sampled(tiny):
    model, tokenizer = tiny
    torch.manual_seed(1)
    spy = Spy(TransformersBackend(model, tokenizer, temperature=1.0, batch_size=4))
    config = RolloutConfig(
        max_turns=2, max_tokens_per_turn=10, max_observation_tokens=64, max_prompt_tokens=256, max_total_tokens=400
    )
    engine = RolloutEngine(spy, OverlapRetriever(), tokenizer, config, topk=2, chat=True)
    trajectories = engine.run(["Answer the given question."] * 3, ["who?", "when?", "where?"])
    for t in trajectories:
        # Rebuild the completion from the backend's own outputs and the observations: it must match id for id.
        turns = [
            ids
            for context, ids in spy.returned
            if context[: len(t.prompt_ids)] == t.prompt_ids
            and context[len(t.prompt_ids) :] == t.completion_ids[: len(context) - len(t.prompt_ids)]
        ]
        assert [i for i, m in zip(t.completion_ids, t.completion_mask) if m == 1] == [i for ids in turns for i in ids]
        observations = tokenizer.decode([i for i, m in zip(t.completion_ids, t.completion_mask) if m == 0])
        if t.stop_reason == "max_turns":  # random text is never a valid action: corrected after each search turn
            assert t.turns == 3 and t.invalid_actions == 2 and observations.count("My previous action is invalid") == 2
    assert any(t.stop_reason == "max_turns" for t in trajectories)


FSDP2_SCRIPT = r"""
import os, sys
import torch, torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from inspo_cli.policy.transformers_backend import TransformersBackend
from inspo_cli.config import ModelConfig
from inspo_cli.policy.models import load_model
from inspo_cli.training.guards import _weights_finite

os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=sys.argv[2], RANK="0", WORLD_SIZE="1")
dist.init_process_group("gloo")
model, tokenizer = load_model(ModelConfig(name_or_path=sys.argv[1], dtype="float32"), device="cpu")
for layer in model.model.layers:  # what accelerate's TRANSFORMER_BASED_WRAP does, then the root
    fully_shard(layer)
fully_shard(model)
backend = TransformersBackend(model, tokenizer, temperature=1.0)
for step in range(2):  # a rollout, then a training forward and backward, twice
    backend.generate([tokenizer.encode("who founded Hokin Works?")], [8])
    model(torch.tensor([tokenizer.encode("the river castle")]), labels=torch.tensor([tokenizer.encode(
        "the river castle")])).loss.backward()
weight = model.model.layers[0].mlp.up_proj.weight
assert type(weight).__name__ == "DTensor" and _weights_finite(model)
with torch.no_grad():
    weight.to_local()[0, 0] = float("nan")
assert not _weights_finite(model)
print("FSDP2 OK")
dist.destroy_process_group()
"""


@pytest.mark.slow
def test_generation_then_training_runs_on_fsdp2_sharded_weights(tiny_model_dir, tmp_path):
    """recipes/accelerate/8gpu-fsdp.yaml failed its first step on an H200: generating under inference_mode made the
    parameters FSDP2 all-gathers inference tensors, which the training forward cannot use. Here FSDP2 (one process,
    gloo, on CPU, which accelerate does not offer) wraps the tiny model as accelerate does: the backend's rollouts
    and training passes alternate, and the non-finite guard reads the DTensor shards."""
    import socket
    import subprocess
    import sys

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    script = tmp_path / "fsdp2.py"
    script.write_text(FSDP2_SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script), str(tiny_model_dir), str(port)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0 and "FSDP2 OK" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]


def test_generate_stops_decoding_once_every_row_has_ended(tiny, monkeypatch):
    """The criterion hands generate each row's end as it happens: a call whose rows all hit their stop string
    early decodes no further steps (the finished mask is rebuilt only when a row ends, never left stale)."""
    from inspo_cli.policy import transformers_backend as backends

    _, tokenizer = tiny
    ctx = contexts(tokenizer)[:1]
    target = greedy(tiny).generate(ctx, [20])[0].token_ids
    stop = tokenizer.decode(target[4:7])
    first_end = next(n for n in range(1, 21) if stop in tokenizer.decode(target[:n]))
    steps = []

    class Counting(backends._TurnEnd):
        def __call__(self, input_ids, scores, **kwargs):
            steps.append(input_ids.shape[1] - self.start)
            return super().__call__(input_ids, scores, **kwargs)

    monkeypatch.setattr(backends, "_TurnEnd", Counting)
    stopped = greedy(tiny).generate(ctx, [20], stop=[stop])[0]
    assert stopped.finish == "stop" and len(stopped.token_ids) == first_end < 20
    assert max(steps) == first_end


def test_only_tokens_holding_a_stop_strings_last_character_are_checked_for_it(tiny):
    """A stop string can only be completed by a token whose text holds its last character; every such token is
    checked (the decode is skipped for the rest), by its decoded text, not its vocabulary spelling."""
    from inspo_cli.policy.transformers_backend import _ids_marking_stop

    _, tokenizer = tiny
    marked = _ids_marking_stop(tokenizer, ["</answer>", "</search>"])
    for i in range(len(tokenizer)):
        assert (">" in tokenizer.decode([i], skip_special_tokens=False)) == (i in marked), i
    assert marked and len(marked) < len(tokenizer)


def test_a_turn_ends_at_the_models_own_eos_ids_as_well_as_the_tokenizers():
    """Instruct models list their end-of-turn ids in the generation config (Qwen2.5: <|im_end|> and <|endoftext|>),
    which may differ from the tokenizer's eos: each of them ends a turn as EOS."""
    from types import SimpleNamespace

    from inspo_cli.policy.generation import stop_token_ids

    tokenizer = SimpleNamespace(eos_token_id=3)
    assert stop_token_ids(tokenizer, [1, 2]) == {1, 2, 3}
    assert stop_token_ids(tokenizer, 7) == {3, 7}
    assert stop_token_ids(tokenizer, None) == {3}


@pytest.fixture
def sdpa_flags():
    """The four CUDA SDPA switches as they were, put back after the test (they are process-wide)."""
    cuda = torch.backends.cuda
    names = ("cudnn", "flash", "mem_efficient", "math")
    before = {name: getattr(cuda, f"{name}_sdp_enabled")() for name in names}

    def flags():
        return {name: getattr(cuda, f"{name}_sdp_enabled")() for name in names}

    yield flags
    for name, on in before.items():
        getattr(cuda, f"enable_{name}_sdp")(on)


def test_decoding_on_cuda_turns_only_cudnn_attention_off_and_back_on(sdpa_flags):
    from inspo_cli.policy.generation import decoding_attention

    everything = {"cudnn": True, "flash": True, "mem_efficient": True, "math": True}
    assert sdpa_flags() == everything
    with decoding_attention(torch.device("cuda")):
        assert sdpa_flags() == {**everything, "cudnn": False}
        with decoding_attention("cuda:0"):  # nested: the outer block puts it back, once
            assert sdpa_flags()["cudnn"] is False
        assert sdpa_flags()["cudnn"] is False
    assert sdpa_flags() == everything
    with decoding_attention(torch.device("cpu")):  # CPU attention has no cuDNN: nothing to change
        assert sdpa_flags() == everything
    torch.backends.cuda.enable_flash_sdp(False)  # the user's own choices stay
    with decoding_attention("cuda"):
        assert sdpa_flags() == {**everything, "cudnn": False, "flash": False}
    assert sdpa_flags() == {**everything, "flash": False}
    others = ("flash", "mem_efficient", "math")
    for only, turned_off in (("mem_efficient", True), ("math", True), ("flash", False)):
        for name in others:
            getattr(torch.backends.cuda, f"enable_{name}_sdp")(name == only)
        # memory-efficient or math attention takes a padding mask; flash attention alone does not: cuDNN stays
        with decoding_attention("cuda"):
            assert sdpa_flags() == {"cudnn": not turned_off, **{name: name == only for name in others}}
        assert sdpa_flags()["cudnn"] is True
    torch.backends.cuda.enable_flash_sdp(False)
    with decoding_attention("cuda"):  # cuDNN is the only attention left: turning it off would leave none
        assert sdpa_flags() == {"cudnn": True, "flash": False, "mem_efficient": False, "math": False}


def test_blocks_open_at_once_in_several_threads_share_the_switch_and_the_last_to_close_restores_it(sdpa_flags):
    from inspo_cli.policy.generation import decoding_attention

    first, second = decoding_attention("cuda"), decoding_attention("cuda")
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)  # the first thread's rollout ends while the second's still decodes
    assert sdpa_flags()["cudnn"] is False
    second.__exit__(None, None, None)
    assert sdpa_flags()["cudnn"] is True
    torch.backends.cuda.enable_cudnn_sdp(False)  # the user's own choice: no block turns it on
    with decoding_attention("cuda"):
        pass
    assert sdpa_flags()["cudnn"] is False


def test_every_forward_of_a_generate_call_on_cuda_runs_without_cudnn_attention(tiny, monkeypatch, sdpa_flags):
    from inspo_cli.policy import transformers_backend

    model, tokenizer = tiny
    real, devices = transformers_backend.decoding_attention, []

    def as_on_a_gpu(device):
        devices.append(device)
        return real("cuda")

    monkeypatch.setattr(transformers_backend, "decoding_attention", as_on_a_gpu)
    seen, fail_at = [], [None]

    def record(module, args, kwargs):
        seen.append(torch.backends.cuda.cudnn_sdp_enabled())
        if len(seen) == fail_at[0]:
            raise RuntimeError("out of memory")

    hook = model.register_forward_pre_hook(record, with_kwargs=True)
    try:
        generations = greedy(tiny).generate(contexts(tokenizer), [6, 6, 6])
        assert [len(g.token_ids) for g in generations] == [6, 6, 6]
        assert len(seen) == 6 and not any(seen)  # the prefill and every decode step
        assert devices == [model.device]
        devices.clear()

        class Reporting:  # the model, reporting the device it holds its weights on by index as a GPU's model does
            device = torch.device("cpu", 0)

            def __getattr__(self, name):
                return getattr(model, name)

        backend = TransformersBackend(Reporting(), tokenizer, temperature=0.0)
        backend.generate(contexts(tokenizer), [2, 2, 2])
        assert devices == [torch.device("cpu", 0)]  # the model's device, not that of the ids built on the host
        seen.clear()
        assert sdpa_flags()["cudnn"] is True
        seen.clear()
        fail_at[0] = 3
        with pytest.raises(RuntimeError, match="out of memory"):
            greedy(tiny).generate(contexts(tokenizer), [6, 6, 6])
        assert sdpa_flags()["cudnn"] is True  # put back whatever happens inside
    finally:
        hook.remove()
