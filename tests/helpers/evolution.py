"""Evolution (Alg. 1 lines 17-23) without a model: a scripted optimizer LM, a verifier that looks scores up in a
dict, and a population and replay buffer whose parent and failures are worked out by hand."""

from __future__ import annotations

from inspo_cli.config.sections import PopulationConfig
from inspo_cli.instructions.population import InstructionPopulation
from inspo_cli.instructions.replay import Experience, ReplayBuffer
from inspo_cli.instructions.sampling import Pick

PARENT = "Answer the question; search with <search> query </search> when unsure."
TEXTS = [PARENT, "Think step by step.", "Search first, then answer."]  # i0, i1, i2

SCORES = {
    "Alpha: search twice.": 0.3,
    "Beta: plan first.": 0.6,
    "Gamma: verify facts.": 0.5,
    "Delta: guess.": 0.1,
    "Epsilon: decompose.": 0.9,
    "Zeta: cite.": 0.7,
    PARENT: 0.55,
    "Search first, then answer.": 0.4,
}  # the parents, verified beside their candidates


class ScriptedLM:
    """Answers from a script, in order; an exception in the script is raised; a callable gets the prompt."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.prompts: list[str] = []

    def complete(self, prompt: str) -> str:
        self.prompts.append(prompt)
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer(prompt) if callable(answer) else answer


class DictVerifier:
    def __init__(self, scores):
        self.scores = scores
        self.calls: list[tuple[list[str], list]] = []

    def score(self, instructions, questions, rollouts=1):
        self.calls.append((list(instructions), list(questions)))
        return [[self.scores[text]] * len(questions) for text in instructions]  # the same on every question


def make_config(**overrides) -> PopulationConfig:
    settings = dict(
        instructions=list(TEXTS),
        size=4,
        n_parent=1,
        weight_window=5,
        candidates_per_call=3,
        failures_per_call=2,
        verify_size=3,
        accept="top_n",
        accept_top_n=2,
        max_verify_rounds=3,
        proposer="reflection",
    )
    settings.update(overrides)
    return PopulationConfig(**settings)


def make_population(config: PopulationConfig) -> InstructionPopulation:
    population = InstructionPopulation(config, seed=3)
    for instruction_id, reward in (("i0", 0.8), ("i1", 0.2), ("i2", 0.5)):  # i0 is the parent, then i2, i1
        population.observe([Pick(instruction_id, population[instruction_id].text)], [reward])
    population.end_step(1)
    return population


def make_buffer() -> ReplayBuffer:
    buffer = ReplayBuffer(capacity=100)
    rows = [
        ("q1", 0.0, 1, "wrong-1", "Paris"),
        ("q2", 0.0, 2, "wrong-2", "Oslo"),
        ("q3", 1.0, 2, "right-3", "Rome"),
        ("q4", 1.0, 2, "right-4", "Bern"),
        ("q5", 1.0, 2, "right-5", "Kyiv"),
    ]
    buffer.extend(
        Experience("i0", key, f"Capital {key}?", (gold,), response, reward, step)
        for key, reward, step, response, gold in rows
    )
    return buffer  # failures(2): q2 (reward 0, latest step), then q1 (reward 0, step 1); 5 distinct questions
