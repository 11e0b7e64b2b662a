"""Can the leak check stop a run on a false match? (issue 51, class 4)

Before each optimizer call, `population.leak_check` (refuse or flag) makes sure no evaluation (dev/test) question
reached the prompt; a hit raises and stops the run. This counts, over realistic reflection prompts (App. E: the
parent instruction, then failed rollouts, each its question, the policy's response and the correct answer), how
often three definitions of "an evaluation question is in the prompt" fire:

- substring (the rule before issue 51): the normalised question is a run of whole words of the normalised prompt;
- 13-gram (GPT-3's contamination check, the alternative considered): a 13-word span of an evaluation question of at
  least 13 words is in the prompt, or a shorter question whole, as a substring;
- shown whole (the rule now, `LeakGuard.check_shown`): a replay question the prompt shows is, normalised, an
  evaluation question; an evaluation question that is also a training question is not held out
  (`training/coevolution.py`).

Every prompt here is built by the reflection proposer (`reflection_prompt`) from training rollouts only, so every
hit is a false positive. The positive control puts one evaluation rollout (an evaluation question as a failure)
into each prompt, the bug the check is for: every rule must fire on all of them.

Two sets of questions:

1. The bundled world (`data/world`): dev and test questions held out, training questions with policy-style
   responses built from the row's own searches and the passages it needs (`supporting_ids`).
2. A synthetic NQ-like set at the paper's scale: 51,000 evaluation questions, most of them short NQ-style ones
   ("who wrote X"), a fifth 2Wiki-style ones of 12-15 words; 20,000 training questions of which a share
   are near-duplicates of evaluation questions: extensions ("who wrote X and when was it first staged"), two-hop
   questions whose first hop the policy searches word for word ("when was the author of X born" -> `<search> who
   wrote X </search>`), paraphrases ("who is the author of X") and exact duplicates across splits. It is a stress
   test of the definitions (the shares are chosen, not measured on NQ), not an estimate of a real run's rate.

    python bench/leak_check.py          # about 2 CPU minutes; writes bench/results/leak_check.json
"""

from __future__ import annotations

import json
import random
import time

from _common import ROOT, machine, update_readme_section

from inspo_cli.instructions.leakage import HeldOutInPrompt, LeakGuard
from inspo_cli.instructions.proposers.reflection import reflection_prompt
from inspo_cli.instructions.replay import Experience, ReplayBuffer
from inspo_cli.metrics import normalize_answer

NGRAM = 13
FAILURES_PER_PROMPT = 4  # the paper's failures_per_call
REPLAY_CAPACITY = 4096  # population.replay_capacity's default
RUN_PROMPTS = (10, 50)  # optimizer prompts of a paper run: 10 evolutions (T_e 150, K_e 15), 1 to 5 rounds
PARENT = "Answer the given question. Search with <search> query </search> and answer with <answer> ... </answer>."
RESULT = ROOT / "bench" / "results" / "leak_check.json"


class Rules:
    """The three definitions over one set of evaluation questions (training duplicates left out, as a run does)."""

    def __init__(self, held_out: list[str], training: list[str]):
        trained = {normalize_answer(q) for q in training}
        self.held_out = [q for q in held_out if normalize_answer(q) not in trained]
        self.duplicates = len(held_out) - len(self.held_out)
        keys = [normalize_answer(q).split() for q in self.held_out]
        self.whole = {tuple(k) for k in keys}  # the substring rule: any of these runs of words
        self.lengths = sorted({len(k) for k in keys})
        self.spans = {tuple(k[i : i + NGRAM]) for k in keys if len(k) >= NGRAM for i in range(len(k) - NGRAM + 1)}
        self.short = {tuple(k) for k in keys if len(k) < NGRAM}
        self.shorter_than_ngram = round(len([k for k in keys if len(k) < NGRAM]) / max(1, len(keys)), 4)
        self.guard = LeakGuard(self.held_out)

    def hits(self, prompt: str, buffer: ReplayBuffer) -> dict[str, bool]:
        """Which definitions fire on `prompt`, whose shown questions are looked up in `buffer`."""
        words = normalize_answer(prompt).split()  # " key " in " prompt ": a run of whole words, as the old rule
        runs = {tuple(words[i : i + n]) for n in self.lengths for i in range(len(words) - n + 1)}
        try:
            self.guard.check_shown(self.guard.shown(prompt, buffer))
            shown = False
        except HeldOutInPrompt:
            shown = True
        return {
            "substring": bool(runs & self.whole),
            f"{NGRAM}-gram": bool(runs & (self.spans | self.short)),
            "shown whole": shown,
        }


def measure(rules: Rules, rollouts: list[Experience], held_out_rollouts: list[Experience], seed: int) -> dict:
    """Each block of `REPLAY_CAPACITY` rollouts fills one replay buffer and is shown, 4 at a time, in prompts."""
    rng = random.Random(seed)
    order = rng.sample(rollouts, len(rollouts))
    fired = {"substring": 0, f"{NGRAM}-gram": 0, "shown whole": 0}
    caught = dict.fromkeys(fired, 0)
    examples: list[str] = []
    prompts = controls = 0
    blocks = range(0, len(order), REPLAY_CAPACITY)
    per_block = -(-len(held_out_rollouts) // len(blocks))
    started = time.perf_counter()
    for b, block in enumerate(blocks):
        rollouts_here = order[block : block + REPLAY_CAPACITY]
        buffer = ReplayBuffer(REPLAY_CAPACITY + per_block)
        buffer.extend(rollouts_here)
        for i in range(0, len(rollouts_here), FAILURES_PER_PROMPT):
            failures = rollouts_here[i : i + FAILURES_PER_PROMPT]
            hits = rules.hits(reflection_prompt(PARENT, failures, 6), buffer)
            prompts += 1
            for rule, hit in hits.items():
                fired[rule] += hit
            if hits["substring"] and len(examples) < 3:
                examples += [
                    f.question for f in failures if rules.hits(reflection_prompt(PARENT, [f], 6), buffer)["substring"]
                ][:1]
        for leaked in held_out_rollouts[b * per_block : (b + 1) * per_block]:
            buffer.add(leaked)  # the bug: an evaluation rollout in the replay buffer, shown among training failures
            prompt = reflection_prompt(PARENT, [*rng.sample(rollouts_here, FAILURES_PER_PROMPT - 1), leaked], 6)
            controls += 1
            for rule, hit in rules.hits(prompt, buffer).items():
                caught[rule] += hit
    rate = {k: v / prompts for k, v in fired.items()}
    return {
        "evaluation_questions": len(rules.held_out),
        "left_out_as_training_questions": rules.duplicates,
        f"shorter_than_{NGRAM}_words": rules.shorter_than_ngram,
        "training_rollouts": len(rollouts),
        "prompts": prompts,
        "false_positive_prompts": fired,
        "false_positive_rate": {k: round(v, 4) for k, v in rate.items()},
        "run_stopped_probability": {k: {n: round(1 - (1 - v) ** n, 3) for n in RUN_PROMPTS} for k, v in rate.items()},
        "positive_control_prompts": controls,
        "positive_control_caught": caught,
        "substring_examples": examples,
        "seconds": round(time.perf_counter() - started, 1),
    }


# -- 1. the bundled world -----------------------------------------------------------------------------------------


def world() -> tuple[Rules, list[Experience], list[Experience]]:
    def rows(split):
        return [json.loads(line) for line in (ROOT / f"data/world/{split}.jsonl").read_text().splitlines()]

    corpus = {row["id"]: row["contents"] for row in rows("corpus")}
    train, held_out = rows("train"), rows("dev") + rows("test")
    rules = Rules([r["question"] for r in held_out], [r["question"] for r in train])

    def rollout(row: dict) -> Experience:
        turns = [f"<think>I need to find out: {row['question']}</think>"]
        for query, passage in zip(row["searches"], row["supporting_ids"]):
            title, text = corpus[passage].split("\n", 1)
            turns += [
                f"<search> {query} </search>",
                f"<information>Doc 1(Title: {title.strip(chr(34))}) {text}</information>",
            ]
        turns.append("<answer> unknown </answer>")
        return Experience("i0", row["id"], row["question"], tuple(row["golden_answers"]), "\n".join(turns), 0.0, 1)

    return rules, [rollout(r) for r in train], [rollout(r) for r in held_out[:200]]


# -- 2. a synthetic NQ-like set with near-duplicates -------------------------------------------------------------

SYLLABLES = [
    "ka",
    "lo",
    "mi",
    "ren",
    "tas",
    "vo",
    "bri",
    "den",
    "sul",
    "mar",
    "eth",
    "quo",
    "nal",
    "pir",
    "zan",
    "hul",
    "dra",
    "wen",
    "cor",
    "fel",
]
SHORT = [
    "who wrote {x}",
    "who sings {x}",
    "who played {y} in {x}",
    "when was {x} founded",
    "where is {x} located",
    "who directed {x}",
    "what is the capital of {x}",
    "who won {x} in {n}",
    "when did {x} come out",
    "how many seasons of {x} are there",
]
LONG = [
    "which film came out first, {x} or {z}",
    "what is the place of birth of the director of film {x}",
    "are {x} and {z} both from the same country",
    "who was born first, {y} of {x} or {z}",
]
EXTENSIONS = ["{q} and when was it first staged", "{q} and what else did they make", "{q} according to the book"]


def name(rng: random.Random) -> str:
    return " ".join("".join(rng.choices(SYLLABLES, k=rng.randint(2, 3))).capitalize() for _ in range(rng.randint(1, 2)))


def question(rng: random.Random, templates: list[str]) -> str:
    return rng.choice(templates).format(x=name(rng), y=name(rng), z=name(rng), n=rng.randint(1950, 2020)) + "?"


def nq_like(seed: int = 0) -> tuple[Rules, list[Experience], list[Experience]]:
    rng = random.Random(seed)
    distinct: dict[str, None] = {}
    while len(distinct) < 51_000:  # distinct, as a benchmark's questions mostly are
        distinct[question(rng, LONG if rng.random() < 0.2 else SHORT)] = None
    held_out = list(distinct)
    training, queries = [], {}
    for _ in range(20_000):
        kind, base = rng.random(), rng.choice(held_out).rstrip("?")
        if kind < 0.10:  # a longer question holding an evaluation question
            text = rng.choice(EXTENSIONS).format(q=base) + "?"
        elif kind < 0.20 and base.startswith("who wrote "):  # two hops; the policy searches the first word for word
            text, queries[len(training)] = f"when was the author of {base[10:]} born?", base
        elif kind < 0.25:  # a paraphrase or a change of tense: different words
            text = base.replace("who wrote", "who is the author of").replace("who sings", "who sang") + " exactly?"
        elif kind < 0.27:  # the same question in both splits (NQ repeats some)
            text = base + "?"
        else:
            text = question(rng, SHORT)
        training.append(text)
    rules = Rules(held_out, training)

    def rollout(i: int, text: str, key: str) -> Experience:
        query = queries.get(i, text.rstrip("?"))
        response = (
            f"<think>The question asks {text.rstrip('?')}.</think>\n<search> {query} </search>\n"
            f"<information>Doc 1(Title: {name(rng)}) {query.capitalize()}? Sources differ.</information>\n"
            f"<answer> {name(rng)} </answer>"
        )
        return Experience("i0", key, text, (name(rng),), response, 0.0, 1)

    rollouts = [rollout(i, text, f"train-{i}") for i, text in enumerate(training)]
    leaked = [rollout(-1, text, f"test-{i}") for i, text in enumerate(rng.sample(rules.held_out, 500))]
    return rules, rollouts, leaked


def main() -> None:
    results = {
        "machine": machine(),
        "ngram": NGRAM,
        "failures_per_prompt": FAILURES_PER_PROMPT,
        "world": measure(*world(), seed=0),
        "nq_like": measure(*nq_like(), seed=0),
    }
    RESULT.write_text(json.dumps(results, indent=2) + "\n")
    rows = []
    for key, label in (("world", "bundled world"), ("nq_like", "synthetic NQ-like")):
        r = results[key]
        fp, caught, stop = r["false_positive_prompts"], r["positive_control_caught"], r["run_stopped_probability"]
        rows.append(
            f"| {label} | {r['evaluation_questions']:,} ({r[f'shorter_than_{NGRAM}_words']:.0%}) | "
            f"{r['prompts']:,} | "
            + " | ".join(
                f"{fp[k]} ({r['false_positive_rate'][k]:.2%}); {stop[k][RUN_PROMPTS[0]]:.0%} / "
                f"{stop[k][RUN_PROMPTS[1]]:.0%}"
                for k in fp
            )
            + " | "
            + " / ".join(str(caught[k]) for k in caught)
            + f" of {r['positive_control_prompts']} |"
        )
    world_example = results["world"]["substring_examples"][:1]
    update_readme_section(
        "leak_check",
        "\n".join(
            [
                "## Leak check: false matches that would stop a run (`python bench/leak_check.py`, issue 51)",
                "",
                "Reflection prompts (App. E, 4 failed training rollouts each) checked against the evaluation "
                "questions by "
                "three definitions; every hit on them is a false positive, and one stops the run (`HeldOutInPrompt`). "
                f"Each cell: prompts hit (share); the chance a paper run of {RUN_PROMPTS[0]} / {RUN_PROMPTS[1]} "
                f"optimizer "
                "prompts stops. The positive control shows one evaluation rollout in each prompt (the bug the check is "
                "for). The synthetic set is a stress test with chosen shares of near-duplicates, not an estimate for "
                "NQ. "
                "Results: `bench/results/leak_check.json`.",
                "",
                f"| questions | evaluation questions (under {NGRAM} words) | prompts | substring (before) | "
                f"{NGRAM}-gram | "
                f"shown whole (now) | control caught (substring / {NGRAM}-gram / shown whole) |",
                "|---|---|---|---|---|---|---|",
                *rows,
                "",
                *(
                    [
                        f"On the bundled world the substring rule fires on a training question itself: "
                        f"{world_example[0]!r} "
                        "holds a test question whole.",
                        "",
                    ]
                    if world_example
                    else []
                ),
                "The rule now (`LeakGuard.check_shown`) fires only when a question the prompt shows from the replay "
                "buffer "
                "is, normalised, an evaluation question; the rest of the prompt (the policy's queries and reasoning, "
                "passages, instructions) is never compared, and an evaluation question that is also a training "
                "question "
                f"is not held out. A {NGRAM}-gram rule matches a shorter question whole, as a substring, so on "
                f"questions "
                "this short it is the substring rule.",
            ]
        ),
    )
    print(json.dumps({k: results[k] for k in ("world", "nq_like")}, indent=2))


if __name__ == "__main__":
    main()
