"""One instruction for either protocol (issue 51): an instruction written in Search-R1's tags is shown as written
under `agent.protocol: search-r1` and, under `function-calling`, with each tool's element made the call that protocol
reads, so that the protocol ablation compares protocols, not a prompt that contradicts its protocol."""

from __future__ import annotations

from helpers.rollout import tools

from inspo_cli.agent.call_formats import FunctionCallingFormat, SearchR1Format
from inspo_cli.agent.instruction_rendering import function_calling_instruction, response_tags
from inspo_cli.agent.protocol import user_message
from inspo_cli.agent.tools import ToolContext, build_tools
from inspo_cli.config.instruction_defaults import R1_INSTRUCTION, SEARCH_R1_INSTRUCTION, WORKED_EXAMPLE_INSTRUCTION

SEARCH_CALL = '<tool_call>\n{{"name": "search", "arguments": {{"query": "{}"}}}}\n</tool_call>'


def user_turn(tokenizer, ids) -> str:
    """The user message of a decoded chat prompt: what the instruction and question became."""
    return tokenizer.decode(ids).split("<|im_start|>user\n", 1)[1].split("<|im_end|>", 1)[0]


def test_search_r1s_instruction_under_function_calling_calls_the_search_function(qwen_tokenizer):
    fmt = FunctionCallingFormat(tools("search"), qwen_tokenizer)
    shown = user_turn(qwen_tokenizer, fmt.prompt_ids(SEARCH_R1_INSTRUCTION, "who founded Hokin Works"))
    assert shown == (
        "Answer the given question. You must conduct reasoning inside <think> and </think> first every time you get "
        "new information. After reasoning, if you find you lack some knowledge, you can call a search engine by "
        + SEARCH_CALL.format("query")
        + " and it will return the top searched results between <tool_response> and "
        "</tool_response>. You can search as many times as your want. If you find no further external knowledge "
        "needed, you can directly provide the answer inside <answer> and </answer>, without detailed illustrations. "
        "For example, <answer> Beijing </answer>. Question: who founded Hokin Works?\n"
    )
    assert "<search>" not in shown and "<information>" not in shown


def test_the_worked_example_becomes_a_function_calling_example(qwen_tokenizer):
    fmt = FunctionCallingFormat(tools("search"), qwen_tokenizer)
    shown = user_turn(qwen_tokenizer, fmt.prompt_ids(WORKED_EXAMPLE_INSTRUCTION, "who?"))
    assert shown == (
        "Answer the question. To look something up, write " + SEARCH_CALL.format("your query") + " and the results "
        "will appear between <tool_response> and </tool_response>. When you know the answer, write it as <answer> "
        "short answer </answer>.\nExample:\nQuestion: Who founded Hokin Works?\n"
        + SEARCH_CALL.format("Hokin Works founder")
        + '\n<tool_response>Doc 1(Title: "Hokin Works") Hokin Works was '
        "founded by Ada Vell.</tool_response>\n<answer> Ada Vell </answer>\nQuestion: who?"
    )
    # the example call is one the protocol reads as a search for the example's query
    call = fmt.parse(SEARCH_CALL.format("Hokin Works founder"))
    assert (call.kind, call.tool.name, call.content, call.error) == ("call", "search", "Hokin Works founder", None)


def test_the_search_r1_protocol_shows_every_built_in_instruction_byte_for_byte(tiny_tokenizer):
    """Faithfulness: the paper's protocol is unchanged (tests/agent/test_tools_unchanged.py checks whole rollouts)."""
    fmt = SearchR1Format(tools("search", "calculator"), tiny_tokenizer, chat=True)
    for instruction in (SEARCH_R1_INSTRUCTION, R1_INSTRUCTION, WORKED_EXAMPLE_INSTRUCTION):
        assert fmt.instruction_for(instruction) == instruction
        assert user_turn(tiny_tokenizer, fmt.prompt_ids(instruction, "who?")) == user_message(instruction, "who?")


def test_each_tool_is_called_by_its_own_name_and_argument(qwen_tokenizer):
    fmt = FunctionCallingFormat(tools("search", "calculator"), qwen_tokenizer)
    evolved = (
        "First <search> Ada Vell born </search>, then <calculate> 1871 - 1843 </calculate>. If I want to "
        "compute, I should put the expression between <calculate> and </calculate>. Use <search> tags to "
        "look up facts. Think in <think> </think>."
    )
    assert fmt.instruction_for(evolved) == (
        "First " + SEARCH_CALL.format("Ada Vell born") + ', then <tool_call>\n{"name": "calculator", '
        '"arguments": {"expression": "1871 - 1843"}}\n</tool_call>. If I want to compute, I should put the '
        'expression in the "expression" argument of a call to calculator. Use <tool_call> tags to look up facts. '
        "Think in <think> </think>."
    )
    # an element is its text alone, over lines as Search-R1 reads it; a span over other tags is not one
    assert fmt.instruction_for(
        "Use <search> tags, e.g. <search> Paris </search>"
    ) == "Use <tool_call> tags, e.g. " + SEARCH_CALL.format("Paris")
    assert fmt.instruction_for("<search>\nwho founded it\n</search>") == SEARCH_CALL.format("who founded it")


def test_an_instruction_written_for_function_calling_or_for_no_tool_is_left_as_it_is(qwen_tokenizer):
    fmt = FunctionCallingFormat(tools("search"), qwen_tokenizer)
    written = "Answer it. Call search:\n" + SEARCH_CALL.format("x") + "\n<tool_response>\nDoc\n</tool_response>"
    assert fmt.instruction_for(written) == written
    assert fmt.instruction_for(R1_INSTRUCTION) == R1_INSTRUCTION
    # a tag of a tool the agent does not have stays: it names nothing this agent can call
    assert fmt.instruction_for("<calculate> 1 + 1 </calculate>") == "<calculate> 1 + 1 </calculate>"


def test_the_result_tags_are_read_off_the_template():
    assert response_tags(
        "<|im_end|>\n<|im_start|>user\n<tool_response>\n", "\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    ) == ("<tool_response>", "</tool_response>")
    # a template that writes its tool results without tags (a role header) keeps Search-R1's words
    assert response_tags("<|eot_id|><|start_header_id|>ipython<|end_header_id|>\n\n", "<|eot_id|>") is None
    assert response_tags("<a>\n", "\n</b>") is None
    [search] = tools("search")
    written = function_calling_instruction(
        "results in <information> and </information>", [search], lambda tool, text: f"CALL({text})", None
    )
    assert written == "results in <information> and </information>"


def test_the_protocol_ablation_arm_prompts_the_function_not_the_tags(repo_root, qwen_tokenizer):
    """`inspo ablate --protocol search-r1,function-calling` on the paper's Search-R1 recipe: the function-calling arm's
    policy is told to call the search function, the Search-R1 arm sees App. F's instruction unchanged."""
    from inspo_cli.ablation.plan import plan_axes, resolve
    from inspo_cli.agent.rollout import RolloutEngine
    from inspo_cli.instructions.initial import initial_instructions

    plan = plan_axes(
        repo_root / "recipes/qwen2.5-3b/search-r1.yaml", [("protocol", ["search-r1", "function-calling"])], seeds=[0]
    )
    shown = {}
    for variant in plan.variants:
        recipe = resolve(variant)
        [instruction] = initial_instructions(recipe)
        assert instruction == SEARCH_R1_INSTRUCTION
        engine = RolloutEngine(
            None,
            None,
            qwen_tokenizer,
            recipe.rollout,
            topk=recipe.retriever.topk,
            chat=True,
            tools=build_tools(recipe.agent.tools, ToolContext(None, recipe.retriever.topk)),
            protocol=recipe.agent.protocol,
        )
        shown[recipe.agent.protocol] = user_turn(qwen_tokenizer, engine.prompt_ids(instruction, "who?"))
    assert shown["search-r1"] == user_message(SEARCH_R1_INSTRUCTION, "who?")
    assert "<search>" not in shown["function-calling"] and "<information>" not in shown["function-calling"]
    assert SEARCH_CALL.format("query") in shown["function-calling"]
    assert "<answer> Beijing </answer>" in shown["function-calling"] and "<think>" in shown["function-calling"]
