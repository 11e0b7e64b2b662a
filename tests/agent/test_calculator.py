"""The calculator tool (issues 40 and 51): exact arithmetic, its bounds pinned, refusals in one short line, and
an error observation instead of a raise."""

from __future__ import annotations

import sys
import time

import pytest

from inspo_cli.agent.tools.arithmetic import ArithmeticRefused, evaluate
from inspo_cli.agent.tools.calculator import Calculator


@pytest.mark.parametrize(
    "expression, value",
    [
        ("(2024 - 1987) * 12", "444"),
        ("2024 − 1987", "37"),
        ("7 / 4", "1.75"),
        ("10 ÷ 4", "2.5"),
        ("3 × 4", "12"),
        ("0.1 + 0.2", "0.3"),  # exact: decimals as written, not binary floats
        ("1 / 3", "1/3 (about 0.333333333333)"),
        ("-2 / 3", "-2/3 (about -0.666666666667)"),
        ("2 ** -2", "0.25"),
        ("2^10", "1024"),
        ("-7 // 2", "-4"),
        ("-7 % 3", "2"),
        ("2e3 + 1", "2001"),
        ("1987 < 2001", "true"),
        ("3 == 3.0", "true"),
        ("1 != 1", "false"),
        ("((((1))))", "1"),
        ("1_000 + 1", "1001"),
        (" 12 ", "12"),
        ("+".join(["1"] * 290), "290"),
    ],
)
def test_the_calculator_is_exact(expression, value):
    assert evaluate(expression) == value


@pytest.mark.parametrize(
    "expression, why",
    [
        ("9**9**9", "exponent may be at most 10,000"),
        ("2**10000", "at most 3,000 digits"),
        ("(" * 10_000 + "1" + ")" * 10_000, "longer than 1,000 characters"),
        ("(" * 60 + "1" + ")" * 60, "more than 50 nested parentheses"),
        ("1" * 1_000_000, "longer than 1,000 characters"),
        ("9" * 101, "more than 100 digits"),
        ("1e400", "exponent may be at most 100"),
        ("+".join(["1"] * 400), "more than 300 operations"),
        ("-" * 900 + "1", "more than 300 operations"),
        ("x + 1", "names are not arithmetic"),
        ("__import__('os').system('true')", "function calls are not arithmetic"),
        ("(1).real", "attributes are not arithmetic"),
        ("lambda: 1", "lambdas are not arithmetic"),
        ("'a' * 3", "str constants are not numbers"),
        ("[1, 2][0]", "subscripts are not arithmetic"),
        ("True + 1", "bool constants are not numbers"),
        ("3j", "complex constants are not numbers"),
        ("1 < 2 < 3", "one comparison at a time"),
        ("(1 < 2) + 1", "not a number"),
        ("1 / 0", "division by zero"),
        ("1 % 0", "division by zero"),
        ("0 ** -1", "division by zero"),
        ("2 ** 0.5", "whole number"),
        ("", "empty"),
        ("1 +", "not an arithmetic expression"),
        ("10**3000 * 10**3000", "more than 3,000 digits"),
    ],
)
def test_the_calculator_refuses_in_one_short_line_and_quickly(expression, why):
    started = time.perf_counter()
    with pytest.raises(ArithmeticRefused, match=why) as refused:
        evaluate(expression)
    assert time.perf_counter() - started < 2 and "\n" not in str(refused.value) and len(str(refused.value)) < 120


def test_the_calculator_tool_answers_an_error_observation_instead_of_raising():
    observations = Calculator().call([{"expression": "6 * 7"}, {"expression": "1/0"}, {}, {"expression": 5}])
    assert [o.text for o in observations] == [
        "42",
        "error: division by zero",
        "error: the expression must be text",
        "error: the expression must be text",
    ]
    assert [o.error for o in observations] == [False, True, True, True]
    assert all(o.passage_ids is None for o in observations)


# -- issue 51: the calculator writes out whatever it computes, and its bounds are pinned ----------------------------


@pytest.mark.parametrize(
    "expression, value",
    [
        ("1 / 8", "0.125"),
        ("-1 / 8", "-0.125"),
        ("1 / 16", "0.0625"),
        ("1 / 250", "0.004"),
        ("3 / 40", "0.075"),
        ("10 / 4", "2.5"),
        ("6 / 3", "2"),
        ("2 / 3 * 3", "2"),
        ("1 / 1024", "0.0009765625"),
        ("7 // 2", "3"),
        ("7.5 % 2", "1.5"),
        ("1 / 6", "1/6 (about 0.166666666667)"),
        ("1 / 7 * 7", "1"),
        ("1e100", "1" + "0" * 100),
        ("1e-100", "0." + "0" * 99 + "1"),
        ("1.5e2", "150"),
        ("1e+2", "100"),
        ("2E3", "2000"),
        ("9" * 100 + " - " + "9" * 100, "0"),
    ],
)
def test_division_is_exact_and_a_literals_exponent_goes_to_its_bound(expression, value):
    assert evaluate(expression) == value


@pytest.mark.parametrize("expression", ["1e101", "1e-101", "1.5E+101"])
def test_a_literals_exponent_past_its_bound_is_refused(expression):
    with pytest.raises(ArithmeticRefused, match="a number's exponent may be at most 100"):
        evaluate(expression)


def test_a_result_too_long_for_a_decimal_is_written_as_its_exact_fraction():
    """2**-9000 is computed exactly; its 9,000-place decimal would pass Python's int-to-str limit, so it is written
    as a fraction (each part within the 3,000 digits every result keeps), never a ValueError."""
    for expression, sign in (("0.5**9000", ""), ("2**-9000", ""), ("-2**-9000", "-"), ("0.2**4000", "")):
        text = evaluate(expression)
        numerator, _, rest = text.partition("/")
        denominator, _, approximation = rest.partition(" ")
        assert (numerator, approximation) == (f"{sign}1", "(about 0)")
        assert int(denominator) in (2**9000, 5**4000)
    assert evaluate("0.5**3000") == "0." + str(5**3000).rjust(3000, "0")  # a decimal up to 3,000 places
    # ... and 3,000 digits in all: this one's decimal has 5,096 (past the int-to-str limit)
    assert evaluate("(10**2999 + 1) * 0.5**3000").startswith(f"{10**2999 + 1}/{2**3000} (about ")
    assert evaluate("(10**2000 + 1) * 0.5**3000").startswith(f"{10**2000 + 1}/{2**3000} (about ")  # 4,097
    assert evaluate("-(0.5)**-9000") == str(-(2**9000))
    for expression in ("(1/3)**9999", "-(7/3)**-9999", "9**9**9"):
        with pytest.raises(ArithmeticRefused, match="a power"):
            evaluate(expression)
    observations = Calculator().call([{"expression": e} for e in ("0.5**9000", "(1/3)**9999", "2**-9000")])
    assert [o.error for o in observations] == [False, True, False]


def test_a_result_past_the_processes_own_int_to_str_limit_is_refused_not_raised():
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(640)
    try:
        with pytest.raises(ArithmeticRefused, match="the result is too long to write out"):
            evaluate("7 ** 1000")
    finally:
        sys.set_int_max_str_digits(limit)
