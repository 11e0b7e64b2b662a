"""Search-o1 (Li et al., 2025): agentic search with a Reason-in-Documents step, after its released prompts.

The model reasons and writes `<|begin_search_query|> q <|end_search_query|>` when it needs knowledge. The
retrieved passages are not pasted in raw: a second call of the same model reads them together with the
reasoning so far and the query, and only its "Final Information" goes back into the reasoning, between
`<|begin_search_result|>` and `<|end_search_result|>`. The answer is the last `\\boxed{…}` (or `<answer>`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from inspo_cli.agent.protocol import format_passages
from inspo_cli.evaluation.methods.base import MethodContext, Prediction, short_answer

BEGIN_QUERY, END_QUERY = "<|begin_search_query|>", "<|end_search_query|>"
BEGIN_RESULT, END_RESULT = "<|begin_search_result|>", "<|end_search_result|>"

SEARCH_O1_INSTRUCTION = (
    "You are a reasoning assistant with the ability to perform web searches to help you answer the user's question "
    "accurately. You have special tools:\n\n"
    f"- To perform a search: write {BEGIN_QUERY} your query here {END_QUERY}.\n"
    "Then, the system will search and analyze relevant web pages, then provide you with helpful information in the "
    f"format {BEGIN_RESULT} ...search results... {END_RESULT}.\n\n"
    "You can repeat the search process multiple times if necessary. The maximum number of search attempts is limited "
    "to {max_searches}.\n\nOnce you have all the information you need, continue your reasoning.\n\n"
    'Example:\nQuestion: "Who got the first Nobel Prize in Physics?"\nAssistant thinking steps:\n'
    "- I might need to look up details about the first Nobel Prize in Physics.\n\n"
    f"Assistant:\n{BEGIN_QUERY}first Nobel Prize in Physics winner{END_QUERY}\n\n"
    "(System returns processed information from relevant web pages)\n\n"
    "Assistant continues reasoning with the new information...\n\n"
    f"Remember:\n- Use {BEGIN_QUERY} to request a web search and end with {END_QUERY}.\n"
    "- When done searching, continue your reasoning."
)
QUESTION_PROMPT = (
    "Please answer the following question. You should think step by step to solve it.\n\n"
    "Provide your final answer in the format \\boxed{{YOUR_ANSWER}}.\n\nQuestion:\n{question}\n\n"
)
REASON_IN_DOCUMENTS = (
    "**Task Instruction:**\n\nYou are tasked with reading and analyzing web pages based on the following inputs: "
    "**Previous Reasoning Steps**, **Current Search Query**, and **Searched Web Pages**. Your objective is to extract "
    "relevant and helpful information for **Current Search Query** from the **Searched Web Pages** and seamlessly "
    "integrate this information into the **Previous Reasoning Steps** to continue reasoning for the original "
    "question.\n\n**Output Format:**\n- Present the information beginning with `**Final Information**`.\n"
    "- If the web pages do not provide any helpful information, output: `**Final Information**\n\nNo helpful "
    "information found.`\n\n**Inputs:**\n- **Previous Reasoning Steps:**\n{reasoning}\n\n- **Current Search Query:**\n"
    "{query}\n\n- **Searched Web Pages:**\n{documents}\n\nNow you should analyze each web page and find helpful "
    'information based on the current search query "{query}" and previous reasoning steps.'
)
_QUERY_RE = re.compile(re.escape(BEGIN_QUERY) + r"(.*?)" + re.escape(END_QUERY), re.DOTALL)
_BOXED_RE = re.compile(r"\\boxed\{((?:[^{}]|\{[^{}]*\})*)\}")


def boxed_answer(text: str) -> str | None:
    """The last `\\boxed{…}`, else an `<answer>`, else None (a Search-o1 answer must be marked)."""
    found = [f for f in _BOXED_RE.findall(text) if not f.strip().startswith("YOUR_ANSWER")]  # an echoed template
    if found:
        return re.sub(r"\\text\{([^{}]*)\}", r"\1", found[-1]).strip() or None
    return short_answer(text) if "<answer>" in text else None


def _final_information(text: str) -> str:
    _, mark, after = text.partition("**Final Information**")
    return (after if mark else text).strip() or "No helpful information found."


def predict(ctx: MethodContext, questions: Sequence[str]) -> list[Prediction]:
    n, max_searches = len(questions), ctx.rollout.max_turns
    system = SEARCH_O1_INSTRUCTION.replace("{max_searches}", str(max_searches))
    reasoning = [""] * n
    queries: list[list[str]] = [[] for _ in range(n)]
    retrieved: list[list[list[str]]] = [[] for _ in range(n)]
    stop_reason: list[str | None] = [None] * n

    def prompt(row: int) -> str:
        return ctx.prompt(system, QUESTION_PROMPT.format(question=questions[row]), prefix=reasoning[row])

    open_rows = list(range(n))
    for _ in range(max_searches + 1):
        if not open_rows:
            break
        outputs = ctx.generate([prompt(r) for r in open_rows], ctx.rollout.max_tokens_per_turn, stop=[END_QUERY])
        searching = []
        for row, output in zip(open_rows, outputs, strict=True):
            reasoning[row] += output
            found = _QUERY_RE.findall(output)
            if found and found[-1].strip() and len(queries[row]) < max_searches:
                searching.append(row)
                queries[row].append(found[-1].strip())
            else:
                stop_reason[row] = "answer" if boxed_answer(output) else ("max_turns" if found else "eos")
        if searching:
            results = ctx.search([queries[r][-1] for r in searching])
            analysis_prompts = [
                ctx.prompt(
                    "You are a helpful assistant.",
                    REASON_IN_DOCUMENTS.format(
                        reasoning=reasoning[r], query=queries[r][-1], documents=format_passages(hits)
                    ),
                )
                for r, hits in zip(searching, results, strict=True)
            ]
            analyses = ctx.generate(analysis_prompts, ctx.rollout.max_observation_tokens)
            for row, hits, analysis in zip(searching, results, analyses, strict=True):
                retrieved[row].append([p.id for p in hits])
                reasoning[row] += f"\n\n{BEGIN_RESULT}{_final_information(analysis)}{END_RESULT}\n\n"
        open_rows = searching  # every row that searched has a search left for the next turn, or ends there
    return [
        Prediction(boxed_answer(reasoning[r]), reasoning[r], len(queries[r]), queries[r], retrieved[r], stop_reason[r])
        for r in range(n)
    ]
