"""A tool from outside the package by import path (issue 40): how it is built, what is refused in one line, and the
tags a tool may not take."""

from __future__ import annotations

import sys
import textwrap

import pytest
from helpers.agent_tools import ECHO, ROOT, masked
from helpers.cli_helpers import assert_one_line_error, invoke
from helpers.rollout import engine_for

from inspo_cli.agent.tools import ToolContext, build_tools
from inspo_cli.config import load_recipe
from inspo_cli.errors import InspoError


@pytest.fixture
def echo_module(tmp_path, monkeypatch):
    (tmp_path / "lab_tools.py").write_text(textwrap.dedent(ECHO))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "lab_tools:build"
    sys.modules.pop("lab_tools", None)


def test_a_tool_from_outside_the_package_by_import_path(tiny_tokenizer, echo_module):
    assert load_recipe(None, [f"agent.tools=[search, '{echo_module}']"]).agent.tools == ["search", echo_module]
    engine, _, _ = engine_for(
        tiny_tokenizer, {"Q1": ["<echo> hi </echo>", "<answer> HI </answer>"]}, tools=["search", echo_module]
    )
    [t] = engine.run(["I."], ["Q1 ?"])
    assert masked(tiny_tokenizer, t, 0) == "\n\n<information>HI</information>\n\n" and t.tool_calls == {"echo": 1}
    # the same module, called through function calling: its schema is in the prompt, its name in the call
    call = '<tool_call>\n{"name": "echo", "arguments": {"text": "hi"}}\n</tool_call>'
    engine, _, _ = engine_for(
        tiny_tokenizer,
        {"Q1": [call, "<answer> HI </answer>"]},
        tools=["search", echo_module],
        protocol="function-calling",
        max_tokens_per_turn=256,
    )
    [t] = engine.run(["I."], ["Q1 ?"])
    assert '"name": "echo", "description": "Repeats its text."' in tiny_tokenizer.decode(t.prompt_ids)
    assert "<tool_response>\nHI\n</tool_response>" in masked(tiny_tokenizer, t, 0) and t.tool_calls == {"echo": 1}


def test_tools_that_do_not_build_into_a_usable_tool_are_one_line(echo_module, tmp_path):
    with pytest.raises(InspoError, match="names and tags must differ"):
        build_tools([echo_module, echo_module], ToolContext())
    with pytest.raises(InspoError, match=r"^agent.tools: builtins:repr: build\(\) returned a str, not an "):
        build_tools(["builtins:repr"], ToolContext())
    with pytest.raises(
        InspoError,
        match=r"^agent.tools: tool os:getcwd takes \(\), but a tool is called as "
        r"build\(context\)$",
    ):
        build_tools(["os:getcwd"], ToolContext())
    (tmp_path / "lab_tools.py").write_text(
        textwrap.dedent(ECHO)
        + textwrap.dedent("""
        def broken(context):
            raise KeyError("no such corpus")


        def bad_tag(context):
            tool = Echo()
            tool.tag = "my tool>"
            return tool
        """)
    )
    sys.modules.pop("lab_tools", None)
    with pytest.raises(InspoError, match=r"^agent.tools: lab_tools:broken: build\(\) raised KeyError: 'no such"):
        build_tools(["lab_tools:broken"], ToolContext())
    with pytest.raises(InspoError, match="tag 'my tool>' is not an element name"):
        build_tools(["lab_tools:bad_tag"], ToolContext())


@pytest.mark.parametrize(
    "tag", ["answer", "information", "think", "tool_call", "tool_response", "tools", "invalid", "Answer"]
)
def test_a_tool_may_not_take_a_tag_the_protocol_writes(tmp_path, monkeypatch, tag):
    """<answer> would end the trajectory instead of calling the tool, <information> is the observation block, a tool
    tagged `invalid` would have its calls counted as turns without an action; refused by `inspo recipe check`, which
    builds the tools, not first at the run's start."""
    (tmp_path / "lab_clash.py").write_text(
        textwrap.dedent(ECHO)
        + textwrap.dedent(f"""
        def clash(context):
            tool = Echo()
            tool.tag = {tag!r}
            return tool
        """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "lab_clash", raising=False)
    with pytest.raises(
        InspoError,
        match=rf"^agent.tools: lab_clash:clash: tag '{tag}' is the protocol's own "
        r"element; a tool's tag must be none of answer, information, think",
    ):
        build_tools(["search", "lab_clash:clash"], ToolContext())
    result = invoke("recipe", "check", ROOT / "recipes/demo.yaml", "--set", "agent.tools=[search, 'lab_clash:clash']")
    assert_one_line_error(result, "agent.tools: lab_clash:clash: tag", "is the protocol's own element")
    sys.modules.pop("lab_clash", None)
