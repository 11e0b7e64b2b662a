"""Built-in instruction texts.

`SEARCH_R1_INSTRUCTION` is Search-R1's instruction as printed in the INSPO paper (App. F), verbatim,
typos included, because it is the static-instruction baseline every result is compared with. The question
is appended by the rollout engine as `Question: ...`.

`R1_INSTRUCTION` is Search-R1's instruction for the models without the search tool (its
`scripts/data_process/nq.py`, template "base"), verbatim: the paper's "R1" (GRPO without search) and "SFT"
baselines of Table 1 use it (recipes/qwen2.5-*/grpo-no-search.yaml, sft.yaml).

`WORKED_EXAMPLE_INSTRUCTION` is a short instruction with one worked example of the search/answer protocol, the
question placed at `{question}`. Small models follow it where Search-R1's instruction gets no tags at all
(docs/architecture.md, "Facts the design rests on"), so the CPU demo (recipes/demo.yaml, which spells it out so
the recipe stands alone), the tests and the benchmarks use it. Its text is measured: changing it changes their results.
"""

SEARCH_R1_INSTRUCTION = (
    "Answer the given question. You must conduct reasoning inside <think> and </think> first every time you "
    "get new information. After reasoning, if you find you lack some knowledge, you can call a search engine "
    "by <search> query </search> and it will return the top searched results between <information> and "
    "</information>. You can search as many times as your want. If you find no further external knowledge "
    "needed, you can directly provide the answer inside <answer> and </answer>, without detailed "
    "illustrations. For example, <answer> Beijing </answer>."
)

R1_INSTRUCTION = (
    "Answer the given question. You should first have a reasoning process in mind and then provides the answer. "
    "Show your reasoning in <think> </think> tags and return the final answer in <answer> </answer> tags, for "
    "example <answer> Beijing </answer>. Question: {question}\n"
)

WORKED_EXAMPLE_INSTRUCTION = (
    "Answer the question. To look something up, write <search> your query </search> and the results will appear "
    "between <information> and </information>. When you know the answer, write it as <answer> short answer </answer>.\n"
    "Example:\nQuestion: Who founded Hokin Works?\n<search> Hokin Works founder </search>\n"
    '<information>Doc 1(Title: "Hokin Works") Hokin Works was founded by Ada Vell.</information>\n'
    "<answer> Ada Vell </answer>\nQuestion: {question}"
)
