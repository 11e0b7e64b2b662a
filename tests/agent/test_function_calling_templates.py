"""`agent.protocol: function-calling` (issue 40) through the chat template: a template with tool support renders
the prompt and tool results itself, one without is rendered the way Qwen2.5 renders tools, and the protocol is a
recipe field checked against the template."""

from __future__ import annotations

import copy
import json
import re

import pytest
from helpers.function_calling import TOOL_TURN, USER_TURN
from helpers.rollout import tools

from inspo_cli.agent.call_formats import (
    FUNCTION_CALLING_CORRECTIVE,
    QWEN25_TEMPLATE,
    FunctionCallingFormat,
)
from inspo_cli.config import RecipeError, load_recipe
from inspo_cli.registry import PROTOCOLS


def schema_lines(*names) -> str:
    return "\n".join(json.dumps(t.schema(), ensure_ascii=False) for t in tools(*names))


def qwen_tools_system(identity: str, *names) -> str:
    return (
        f"<|im_start|>system\n{identity}\n\n# Tools\n\nYou may call one or more functions to assist with the user "
        "query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
        f"{schema_lines(*names)}\n</tools>\n\nFor each function call, return a json object with function name and "
        'arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, '
        '"arguments": <args-json-object>}\n</tool_call><|im_end|>\n'
    )


def test_a_template_with_tool_support_renders_the_prompt_and_tool_results_itself(qwen_tokenizer):
    fmt = FunctionCallingFormat(tools("search", "calculator"), qwen_tokenizer)
    assert fmt.own_template
    prompt = qwen_tokenizer.decode(fmt.prompt_ids("Answer it.", "who founded Hokin Works"))
    assert prompt == (
        qwen_tools_system(
            "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.", "search", "calculator"
        )
        + "<|im_start|>user\nAnswer it. Question: who founded Hokin Works?\n<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    assert fmt.observation_parts(None, _Obs("R")) == (TOOL_TURN[0], "R", TOOL_TURN[1])
    assert fmt.corrective == (USER_TURN[0], FUNCTION_CALLING_CORRECTIVE, USER_TURN[1])
    assert fmt.stop == ("</tool_call>", "</answer>")


def test_a_template_without_tool_support_is_rendered_the_way_qwen25_renders_tools(tiny_tokenizer):
    """SmolLM2's template (and the tiny model's ChatML) ignores tools=: Qwen2.5's template renders them, with a
    neutral system message instead of Qwen's identity."""
    assert tiny_tokenizer.apply_chat_template(
        [{"role": "user", "content": "x"}], tools=[tools("search")[0].schema()], tokenize=False
    ) == tiny_tokenizer.apply_chat_template([{"role": "user", "content": "x"}], tokenize=False)
    fmt = FunctionCallingFormat(tools("search"), tiny_tokenizer)
    assert not fmt.own_template
    prompt = tiny_tokenizer.decode(fmt.prompt_ids("Answer it.", "who?"))
    assert prompt == (
        qwen_tools_system("You are a helpful assistant.", "search")
        + "<|im_start|>user\nAnswer it. Question: who?\n<|im_end|>\n<|im_start|>assistant\n"
    )
    assert fmt.observation_parts(None, _Obs("R")) == (TOOL_TURN[0], "R", TOOL_TURN[1])


class _Obs:
    def __init__(self, text):
        self.text = text


def test_the_protocol_is_a_recipe_field_checked_against_the_chat_template(repo_root):
    recipe = load_recipe(
        repo_root / "recipes/demo.yaml", ["model.chat_template=auto", "agent.protocol=function-calling"]
    )
    assert recipe.agent.protocol == "function-calling"
    assert load_recipe(repo_root / "recipes/demo.yaml").agent.protocol == "search-r1"
    with pytest.raises(
        RecipeError,
        match="agent.protocol: is function-calling, which writes its prompts through a "
        "chat template, but model.chat_template is off",
    ):
        load_recipe(repo_root / "recipes/demo.yaml", ["agent.protocol=function-calling"])
    protocols = re.escape(", ".join(PROTOCOLS))
    with pytest.raises(RecipeError, match=rf"agent.protocol: must be one of {protocols} \(got 'hermes"):
        load_recipe(repo_root / "recipes/demo.yaml", ["agent.protocol=hermes"])
    with pytest.raises(RecipeError, match=r"\(got 'xxxxx"):
        load_recipe(repo_root / "recipes/demo.yaml", [f"agent.protocol={'x' * 5000}"])


def test_a_template_that_cannot_continue_with_a_tool_message_is_refused_in_one_line(qwen_tokenizer):
    from inspo_cli.errors import InspoError

    raising = copy.deepcopy(qwen_tokenizer)  # renders tools, but refuses any role after the assistant's
    raising.chat_template = QWEN25_TEMPLATE.replace(
        "{%- for message in messages %}",
        "{%- for message in messages %}{%- if loop.index0 > 1 %}{{ raise_exception('roles must alternate') }}"
        "{%- endif %}",
        1,
    )
    with pytest.raises(
        InspoError,
        match=r"^agent.protocol=function-calling: the tokenizer's chat template does "
        r"not render a tool message .* \(it raised TemplateError: roles must "
        r"alternate\)$",
    ):
        FunctionCallingFormat(tools("search"), raising)
    rewriting = copy.deepcopy(qwen_tokenizer)  # renders a tool message without its content
    rewriting.chat_template = QWEN25_TEMPLATE.replace(
        "{{- message.content }}\n        {{- '\\n</tool_response>' }}", "{{- '\\n</tool_response>' }}"
    )
    assert rewriting.chat_template != QWEN25_TEMPLATE
    with pytest.raises(InspoError, match="use agent.protocol=search-r1$"):
        FunctionCallingFormat(tools("search"), rewriting)
