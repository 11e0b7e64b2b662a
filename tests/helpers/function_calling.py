"""Shared by the function-calling tests: a Qwen2.5 tool call and the turns and tools block its template writes."""

from __future__ import annotations

import json

TOOL_TURN = ("<|im_end|>\n<|im_start|>user\n<tool_response>\n", "\n</tool_response><|im_end|>\n<|im_start|>assistant\n")
USER_TURN = ("<|im_end|>\n<|im_start|>user\n", "<|im_end|>\n<|im_start|>assistant\n")


def call(name, **arguments) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"
