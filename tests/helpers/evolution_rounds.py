"""Optimizer answers for two rounds of evolution and the outcome of each candidate, shared by the evolution tests."""

from __future__ import annotations

from helpers.evolution import PARENT

ROUND_1 = "<ins_1>Alpha: search twice.</ins_1>\n<ins_2>Beta: plan first.</ins_2>\n<ins_3>Gamma: verify facts.</ins_3>"
# the parent echoed as <ins_0>, an alive candidate again (whitespace differs), then three new ones
ROUND_2 = (
    f"<ins_0>{PARENT}</ins_0>\n<ins_1>Delta: guess.</ins_1>\n<ins_2>  Beta:   plan first. </ins_2>\n"
    "<ins_3>Epsilon: decompose.</ins_3>\n<ins_4>Zeta: cite.</ins_4>"
)


def outcomes(report):
    return [(c.text, c.round, c.reason) for c in report.candidates]
