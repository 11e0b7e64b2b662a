"""Answer extraction and the QA metrics used as rewards and for evaluation.

Normalisation is SQuAD's (lowercase, drop punctuation, drop the articles a/an/the, collapse whitespace),
as in Search-R1 and FlashRAG, so scores are comparable with the paper's Table 1.

`extract_answer` reads only the *generated response*. Search-R1 extracts from prompt+response and skips
the first `<answer>` because its instruction contains `<answer> Beijing </answer>`; with instructions that
evolve, the number of example tags in the prompt changes, so that trick would silently change rewards.

    >>> exact_match(extract_answer("<think>...</think><answer> The Beatles </answer>"), ["beatles"])
    1.0
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable

_ANSWER_RE = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_ARTICLES_RE = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = set(string.punctuation)


def normalize_answer(text: str) -> str:
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES_RE.sub(" ", text)
    return " ".join(text.split())


def extract_answer(response: str) -> str | None:
    """The text of the last complete `<answer>…</answer>` in `response`, stripped; None if there is none."""
    matches = _ANSWER_RE.findall(response)
    if not matches:
        return None
    return matches[-1].strip()


def _as_list(golden_answers: str | Iterable[str]) -> list[str]:
    if isinstance(golden_answers, str):
        return [golden_answers]
    return [str(answer) for answer in golden_answers]


def exact_match(prediction: str | None, golden_answers: str | Iterable[str]) -> float:
    """1.0 if the normalised prediction equals any normalised golden answer, else 0.0."""
    if prediction is None:
        return 0.0
    pred = normalize_answer(prediction)
    return float(any(pred == normalize_answer(gold) for gold in _as_list(golden_answers)))


def cover_exact_match(prediction: str | None, golden_answers: str | Iterable[str]) -> float:
    """SubEM: 1.0 if any normalised golden answer occurs inside the normalised prediction (token-aligned)."""
    if prediction is None:
        return 0.0
    pred = f" {normalize_answer(prediction)} "
    return float(any(f" {gold} " in pred for gold in map(normalize_answer, _as_list(golden_answers)) if gold))


def f1_score(prediction: str | None, golden_answers: str | Iterable[str]) -> float:
    """Best token-level F1 between the prediction and any golden answer (SQuAD definition)."""
    if prediction is None:
        return 0.0
    pred_tokens = normalize_answer(prediction).split()
    best = 0.0
    for gold in _as_list(golden_answers):
        gold_tokens = normalize_answer(gold).split()
        if not pred_tokens or not gold_tokens:
            best = max(best, float(pred_tokens == gold_tokens))
            continue
        overlap = sum((Counter(pred_tokens) & Counter(gold_tokens)).values())
        if overlap == 0:
            continue
        precision, recall = overlap / len(pred_tokens), overlap / len(gold_tokens)
        best = max(best, 2 * precision * recall / (precision + recall))
    return best


METRICS = {"em": exact_match, "subem": cover_exact_match, "f1": f1_score}
