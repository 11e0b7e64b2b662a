"""Exact arithmetic on a bounded syntax tree: what the calculator tool computes, never through `eval`.

    evaluate("(2024 - 1987) * 12")   # "444"
    evaluate("7 / 4")                # "1.75"
    evaluate("1 / 3")                # "1/3 (about 0.333333333333)"
    evaluate("1987 < 2001")          # "true"
    evaluate("9**9**9")              # raises ArithmeticRefused("a power may have at most 3,000 digits ...")

Numbers are integers and decimals as written (`12`, `3.5`, `0.1` is exactly 1/10, `2e3`), computed as exact fractions;
the operators are + - * / // % ** (also × ÷ − written as such), unary + and -, parentheses, and the comparisons
< <= > >= == != (a chain such as `1 < x < 3` is refused: one comparison, no names). Everything else Python's grammar
allows (names, calls, attributes, lambdas, strings, subscripts, booleans) is refused by name. Bounds, each checked
before any work that could exceed it: the expression's length, the nesting of its parentheses, the digits of a
literal and of every intermediate result, and a power's exponent and result size; a deadline caps the whole
evaluation. A refusal is `ArithmeticRefused` with a short message fit to show the policy.
"""

from __future__ import annotations

import ast
import math
import time
from fractions import Fraction

MAX_CHARS = 1000  # of the expression
MAX_DEPTH = 50  # nested parentheses
MAX_TREE_DEPTH = 300  # operations in a chain, `1 + 1 + ... + 1` (two stack frames each: far below Python's limit)
MAX_LITERAL_DIGITS = 100
MAX_RESULT_DIGITS = 3000  # of any intermediate numerator or denominator
MAX_EXPONENT = 10_000
DECIMAL_PLACES = 12  # of the approximation shown beside a fraction with no finite decimal form
DEADLINE_S = 1.0

_BINARY = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**"}
_COMPARE = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
_SPELLINGS = {"×": "*", "÷": "/", "−": "-", "–": "-", "^": "**"}  # the last: no one asking a calculator means xor
_REFUSED = {
    ast.Name: "names",
    ast.Call: "function calls",
    ast.Attribute: "attributes",
    ast.Lambda: "lambdas",
    ast.Subscript: "subscripts",
    ast.BoolOp: "and/or",
    ast.IfExp: "conditionals",
}


class ArithmeticRefused(ValueError):
    """An expression the calculator will not evaluate: the message says why, in a line the policy can read."""


def _digits(value: int) -> int:
    return len(str(abs(value))) if abs(value) < 10**18 else int(abs(value).bit_length() * math.log10(2)) + 1


def _check_size(value: Fraction) -> Fraction:
    if max(_digits(value.numerator), _digits(value.denominator)) > MAX_RESULT_DIGITS:
        raise ArithmeticRefused(f"a result would have more than {MAX_RESULT_DIGITS:,} digits")
    return value


def _depth(text: str) -> int:
    depth = deepest = 0
    for char in text:
        if char == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif char == ")":
            depth -= 1
    return deepest


def evaluate(expression: str, deadline_s: float = DEADLINE_S) -> str:
    """The value of `expression` as text: an integer, a finite decimal, a fraction with its rounded decimal, or
    true/false for a comparison. ArithmeticRefused for anything outside the grammar or the bounds."""
    if not isinstance(expression, str):
        raise ArithmeticRefused("the expression must be text")
    text = expression.strip()
    for spelled, operator in _SPELLINGS.items():
        text = text.replace(spelled, operator)
    if not text:
        raise ArithmeticRefused("the expression is empty")
    if len(text) > MAX_CHARS:
        raise ArithmeticRefused(f"the expression is longer than {MAX_CHARS:,} characters")
    if _depth(text) > MAX_DEPTH:
        raise ArithmeticRefused(f"more than {MAX_DEPTH} nested parentheses")
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise ArithmeticRefused(
            "not an arithmetic expression (numbers, + - * / // % **, parentheses, one comparison)"
        ) from None
    value = _Evaluator(text, time.monotonic() + deadline_s).visit(tree.body, 0)
    if isinstance(value, str):
        return value
    try:
        return _render(value)
    except ValueError:  # int-to-str's own limit (sys.set_int_max_str_digits) set below the bounds here
        raise ArithmeticRefused("the result is too long to write out") from None


def _render(value: Fraction) -> str:
    """`value` written out: an integer, a finite decimal (at most MAX_RESULT_DIGITS digits, else as a fraction: the
    exact decimal of 2**-9000 has 9,000 places), or a fraction with its rounded decimal. Every integer it writes has
    at most MAX_RESULT_DIGITS digits, under Python's int-to-str limit (4,300 by default)."""
    if value.denominator == 1:
        return str(value.numerator)
    denominator, twos, fives = value.denominator, 0, 0
    while denominator % 2 == 0:
        denominator, twos = denominator // 2, twos + 1
    while denominator % 5 == 0:
        denominator, fives = denominator // 5, fives + 1
    places = max(twos, fives)
    if denominator == 1 and places <= MAX_RESULT_DIGITS:  # a finite decimal: exactly `places` places
        scaled = abs(value.numerator) * 10**places // value.denominator
        if _digits(scaled) <= MAX_RESULT_DIGITS:
            sign = "-" if value < 0 else ""
            whole, frac = divmod(scaled, 10**places)
            return f"{sign}{whole}.{frac:0{places}d}"
    rounded = round(value, DECIMAL_PLACES)
    approx = _render(rounded) if rounded.denominator != 1 else str(rounded.numerator)
    return f"{value.numerator}/{value.denominator} (about {approx})"


class _Evaluator:
    def __init__(self, text: str, deadline: float):
        self.text, self.deadline = text, deadline

    def visit(self, node: ast.AST, depth: int) -> Fraction | str:
        if depth > MAX_TREE_DEPTH:
            raise ArithmeticRefused(f"more than {MAX_TREE_DEPTH} operations in a chain")
        if time.monotonic() > self.deadline:
            raise ArithmeticRefused("took too long")
        if isinstance(node, ast.Constant):
            return self._number(node)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
            operand = self._fraction(node.operand, depth)
            return -operand if isinstance(node.op, ast.USub) else operand
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            return self._binary(
                _BINARY[type(node.op)], self._fraction(node.left, depth), self._fraction(node.right, depth)
            )
        if isinstance(node, ast.Compare):
            if len(node.ops) != 1 or type(node.ops[0]) not in _COMPARE:
                raise ArithmeticRefused("one comparison at a time: < <= > >= == !=")
            left, right = self._fraction(node.left, depth), self._fraction(node.comparators[0], depth)
            result = {
                "<": left < right,
                "<=": left <= right,
                ">": left > right,
                ">=": left >= right,
                "==": left == right,
                "!=": left != right,
            }[_COMPARE[type(node.ops[0])]]
            return "true" if result else "false"
        what = next((name for kind, name in _REFUSED.items() if isinstance(node, kind)), type(node).__name__)
        raise ArithmeticRefused(
            f"{what} are not arithmetic: use numbers, + - * / // % **, parentheses"
            if what in _REFUSED.values()
            else f"{what} is not arithmetic"
        )

    def _fraction(self, node: ast.AST, depth: int) -> Fraction:
        value = self.visit(node, depth + 1)
        if isinstance(value, str):
            raise ArithmeticRefused("a comparison's true/false is not a number")
        return value

    def _number(self, node: ast.Constant) -> Fraction:
        value = node.value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ArithmeticRefused(f"{type(value).__name__} constants are not numbers")
        # the literal as written, not its binary float: 0.1 is exactly 1/10
        literal = (ast.get_source_segment(self.text, node) or "").replace("_", "").lower()
        mantissa, _, exponent = literal.partition("e")
        if sum(c.isdigit() for c in mantissa) > MAX_LITERAL_DIGITS:
            raise ArithmeticRefused(f"a number has more than {MAX_LITERAL_DIGITS} digits")
        if exponent and (not exponent.lstrip("+-").isdigit() or abs(int(exponent)) > MAX_LITERAL_DIGITS):
            raise ArithmeticRefused(f"a number's exponent may be at most {MAX_LITERAL_DIGITS}")
        try:
            return Fraction(mantissa) * Fraction(10) ** int(exponent or 0)
        except (ValueError, ZeroDivisionError):
            raise ArithmeticRefused(f"not a number: {literal[:40]}") from None

    @staticmethod
    def _binary(operator: str, left: Fraction, right: Fraction) -> Fraction:
        if operator in ("/", "//", "%") and right == 0:
            raise ArithmeticRefused("division by zero")
        if operator == "**":
            if right.denominator != 1:
                raise ArithmeticRefused("a power's exponent must be a whole number")
            exponent = right.numerator
            if abs(exponent) > MAX_EXPONENT:
                raise ArithmeticRefused(f"a power's exponent may be at most {MAX_EXPONENT:,}")
            if left == 0 and exponent < 0:
                raise ArithmeticRefused("division by zero")
            bits = max(abs(left.numerator).bit_length(), left.denominator.bit_length()) - 1  # <= log2 of the base
            if left not in (0, 1, -1) and bits * abs(exponent) * math.log10(2) > MAX_RESULT_DIGITS:
                raise ArithmeticRefused(f"a power may have at most {MAX_RESULT_DIGITS:,} digits")
            return _check_size(left**exponent)
        result = {
            "+": lambda: left + right,
            "-": lambda: left - right,
            "*": lambda: left * right,
            "/": lambda: left / right,
            "//": lambda: Fraction(left // right),
            "%": lambda: left % right,
        }[operator]()
        return _check_size(result)
