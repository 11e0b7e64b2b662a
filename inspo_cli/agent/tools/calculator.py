"""The calculator tool: exact arithmetic on integers and decimals, `<calculate> (2024 - 1987) * 12 </calculate>`.

The expression is evaluated on its syntax tree by `arithmetic.evaluate` (never `eval`), within bounds on its length,
nesting, digits and powers and a deadline per call; an expression it refuses is an error observation naming why
(`error: division by zero`), which the policy reads and may correct in its next turn.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from inspo_cli.agent.tools.arithmetic import DEADLINE_S, ArithmeticRefused, evaluate
from inspo_cli.agent.tools.base import Observation, Tool, ToolContext


class Calculator(Tool):
    name = "calculator"
    tag = "calculate"
    description = (
        "Exact arithmetic: numbers, + - * / // % **, parentheses, or one comparison (< <= > >= == !=), "
        "e.g. (2024 - 1987) * 12."
    )
    parameters = {
        "type": "object",
        "properties": {"expression": {"type": "string", "description": "the arithmetic to compute"}},
        "required": ["expression"],
    }
    argument = "expression"
    timeout_s = DEADLINE_S

    def call(self, arguments: Sequence[Mapping[str, Any]]) -> list[Observation]:
        observations = []
        for arguments_of_one in arguments:
            expression = arguments_of_one.get(self.argument)
            try:
                observations.append(Observation(evaluate(expression, self.timeout_s)))  # type: ignore[arg-type]
            except ArithmeticRefused as refused:
                observations.append(Observation(f"error: {refused}", error=True))
        return observations


def build(context: ToolContext) -> Tool:
    return Calculator()
