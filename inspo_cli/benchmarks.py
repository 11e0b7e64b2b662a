"""The paper's QA benchmarks, read exactly the way Search-R1 reads them.

INSPO follows Search-R1: train on the NQ + HotpotQA training sets, report exact match on seven test sets, all
from FlashRAG's preprocessed copies on the Hugging Face hub. This module turns a benchmark name into `Question`s:
from a local file when there is one (data/benchmarks/<name>/<split>.jsonl, .parquet or .json), else from the hub,
else with a one-line error saying where to put the file (downloads and the status listing: `benchmark_fetch`);
`world`, the bundled synthetic world, from data/world/<split>.jsonl in the same row format. Reading and checking a
file's rows is `qa_files`'.

    questions = load_benchmark("hotpotqa", limit=500)          # HotpotQA dev, the split Search-R1 scores
    train = load_train_mixture(limit=1000)                     # 500 NQ train, then 500 HotpotQA train

Facts relied on (public sources):
- Hub repo RUC-NLPIR/FlashRAG_datasets (CC BY-SA 4.0) has one config per dataset, each split at <config>/<split>.jsonl
  (the dataset card's `configs:` block, huggingface.co/datasets/RUC-NLPIR/FlashRAG_datasets/blob/main/README.md).
- Rows are {"id", "question", "golden_answers": [str], "metadata": {...}}; split sizes as in `BENCHMARKS`
  (RUC-NLPIR/FlashRAG docs/zh-cn/data_preparation/evaluation-datasets.md).
- Search-R1 scores a dataset's test split if it has one, else dev, and trains on nq + hotpotqa train concatenated
  (PeterGriffinJin/Search-R1 scripts/data_process/qa_search_{test,train}_merge.py, read in the fork
  xuetae/Search-R1). It also appends "?" to questions lacking one; that belongs to the prompt builder, not here.
- The paper's Table 1 order is HotpotQA, 2WikiMQA, MuSiQue, Bamboogle, NQ, TriviaQA, PopQA (= `TEST_BENCHMARKS`).
"""

from __future__ import annotations

import difflib
import os
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from inspo_cli import hub
from inspo_cli.errors import InspoError
from inspo_cli.hub import hub_offline_reason
from inspo_cli.qa_files import (
    FILE_SUFFIXES,
    Question,
    find_split_file,
    first_line,
    load_questions,
    questions_from_rows,
)

HUB_REPO = "RUC-NLPIR/FlashRAG_datasets"
WORLD = "world"
TRAIN_MIXTURE_NAME = "nq_hotpotqa"  # the recipe's `data.train` value for the paper's training mixture
TRAIN_MIXTURE = ("nq", "hotpotqa")
DEFAULT_DATA_DIR = "data/benchmarks"
DEFAULT_WORLD_DIR = "data/world"
WORLD_SPLITS = ("train", "dev", "test")


@dataclass(frozen=True)
class BenchmarkSpec:
    name: str  # our name, also the hub config and folder name for all seven
    config: str  # hub config name
    display_name: str  # the paper's Table 1 column header
    test_split: str  # the split Search-R1 reports
    multi_hop: bool
    splits: dict[str, int] = field(hash=False, compare=False)  # FlashRAG's splits and their row counts


def _spec(name: str, display: str, test_split: str, multi_hop: bool, **splits: int) -> BenchmarkSpec:
    return BenchmarkSpec(name, name, display, test_split, multi_hop, splits)


BENCHMARKS: dict[str, BenchmarkSpec] = {
    s.name: s
    for s in (
        _spec("hotpotqa", "HotpotQA", "dev", True, train=90_447, dev=7_405),
        _spec("2wikimultihopqa", "2WikiMQA", "dev", True, train=15_000, dev=12_576),
        _spec("musique", "MuSiQue", "dev", True, train=19_938, dev=2_417),
        _spec("bamboogle", "Bamboogle", "test", True, test=125),
        _spec("nq", "NQ", "test", False, train=79_168, dev=8_757, test=3_610),
        _spec("triviaqa", "TriviaQA", "test", False, train=78_785, dev=8_837, test=11_313),
        _spec("popqa", "PopQA", "test", False, test=14_267),
    )
}
TEST_BENCHMARKS = tuple(BENCHMARKS)  # Table 1 order: multi-hop sets first, then general QA

_ALIASES = {
    "naturalquestions": "nq",
    "nqopen": "nq",
    "tqa": "triviaqa",
    "trivia": "triviaqa",
    "hotpot": "hotpotqa",
    "2wiki": "2wikimultihopqa",
    "2wikimqa": "2wikimultihopqa",
    "2wikimultihop": "2wikimultihopqa",
    "musiqueans": "musique",
    "nqhotpotqatrain": TRAIN_MIXTURE_NAME,
    "trainmixture": TRAIN_MIXTURE_NAME,
}


def _key(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch not in "-_ ")


_LOOKUP = {**{_key(n): n for n in (*BENCHMARKS, WORLD, TRAIN_MIXTURE_NAME)}, **_ALIASES}


# -- names ------------------------------------------------------------------------------------------------------


def resolve_benchmark_name(text: str) -> str:
    """The canonical name for `text` (case, '-', '_' and aliases like '2wiki' forgiven); InspoError if unknown."""
    name = _LOOKUP.get(_key(text))
    if name is not None:
        return name
    close = difflib.get_close_matches(_key(text), list(_LOOKUP), n=1, cutoff=0.6)
    hint = f" (did you mean {_LOOKUP[close[0]]!r}?)" if close else ""
    valid = ", ".join((*BENCHMARKS, WORLD, TRAIN_MIXTURE_NAME))
    raise InspoError(f"unknown benchmark {text!r}{hint}; use one of: {valid}, or all for the seven test sets")


def is_benchmark_file(token: str) -> bool:
    """Whether a --benchmarks entry names a QA file of the user's (a path with a separator or a file suffix)
    rather than a built-in benchmark."""
    return "/" in token or "\\" in token or Path(token).suffix.lower() in FILE_SUFFIXES


def parse_benchmark_names(text: str | Iterable[str], files: bool = True) -> list[str]:
    """'nq,2wiki' → ['nq', '2wikimultihopqa']; 'all' → the seven test sets; duplicates dropped, order kept. With
    `files`, a path to a QA file (`is_benchmark_file`) is kept as given."""
    tokens = text.split(",") if isinstance(text, str) else [t for item in text for t in str(item).split(",")]
    names: list[str] = []
    for token in (t.strip() for t in tokens):
        if not token:
            continue
        if files and is_benchmark_file(token):
            if token not in names:
                names.append(token)
            continue
        for name in TEST_BENCHMARKS if _key(token) == "all" else (resolve_benchmark_name(token),):
            if name not in names:
                names.append(name)
    if not names:
        raise InspoError(f"no benchmark named in {text!r}; give a comma-separated list such as nq,hotpotqa or all")
    return names


# -- local files ----------------------------------------------------------------------------------------------


def local_path(name: str, split: str, data_dir: str | os.PathLike = DEFAULT_DATA_DIR) -> Path | None:
    """The first of data_dir/<name>/<split>.jsonl, .parquet, .json that exists; None if none does."""
    return find_split_file(Path(data_dir) / name, split)


# -- the hub ----------------------------------------------------------------------------------------------------


def hub_allowed() -> bool:
    return hub_offline_reason() is None


class HubDownloadError(Exception):
    """`download_hub_rows` failed (network, auth, a renamed config...); the message is the cause's first line."""


def download_hub_rows(spec: BenchmarkSpec, split: str) -> list[dict]:
    """The raw rows of one FlashRAG split from the hub, through `datasets.load_dataset` (and its cache); an unreachable
    hub fails at once (`inspo_cli.hub`), not after 25 s of retries."""
    if (why := hub.hub_unreachable()) is not None:
        raise HubDownloadError(why)
    import datasets  # imported late: it is slow to import and only the hub path needs it

    try:
        dataset = datasets.load_dataset(HUB_REPO, spec.config, split=split)
        return [dict(row) for row in dataset]
    except Exception as e:  # network, auth, a renamed config...: all end in the same advice
        raise HubDownloadError(first_line(e)) from e


def questions_from_hub_rows(
    spec: BenchmarkSpec, split: str, rows: list[dict], limit: int | None = None
) -> list[Question]:
    """Validated questions from rows `download_hub_rows` returned; errors name HUB_REPO/<config>/<split>.jsonl:ROW."""
    located = ((f"{HUB_REPO}/{spec.config}/{split}.jsonl:{i}", row) for i, row in enumerate(rows, start=1))
    return questions_from_rows(located, spec.name, split, limit)


def _fetch_command(name: str, split: str) -> str:
    if split == "train" and name in TRAIN_MIXTURE:
        return f"inspo data fetch {TRAIN_MIXTURE_NAME}"
    if split == BENCHMARKS[name].test_split:
        return f"inspo data fetch {name}"
    return f"inspo data fetch {name} --split {split}"


# -- loading benchmarks -----------------------------------------------------------------------------------------


def load_benchmark(
    name: str,
    split: str | None = None,
    data_dir: str | os.PathLike = DEFAULT_DATA_DIR,
    world_dir: str | os.PathLike = DEFAULT_WORLD_DIR,
    limit: int | None = None,
    allow_hub: bool | None = None,
) -> list[Question]:
    """The questions of one benchmark split (default: the split Search-R1 reports), first `limit` of them.

    Looks for a local file first, then (when `allow_hub`, by default unless HF_HUB_OFFLINE/HF_DATASETS_OFFLINE is
    set) asks the hub through `datasets.load_dataset`; otherwise raises an InspoError saying where to put the file.
    """
    name = resolve_benchmark_name(name)
    _check_limit(limit)
    if name == TRAIN_MIXTURE_NAME:
        if split not in (None, "train"):
            raise InspoError(f"{TRAIN_MIXTURE_NAME} is the training mixture and has only a train split (got {split!r})")
        return load_train_mixture(data_dir, limit=limit, allow_hub=allow_hub)
    if name == WORLD:
        split = split or "test"
        path = find_split_file(Path(world_dir), split)
        if path is None:
            raise InspoError(
                f"synthetic world split {split!r} not found at {Path(world_dir) / f'{split}.jsonl'}; "
                f"generate it with `inspo data world --out {shlex.quote(str(world_dir))}` "
                "or set data.world_dir"
            )
        return load_questions(path, source=WORLD, limit=limit)

    spec = BENCHMARKS[name]
    split = split or spec.test_split
    path = local_path(name, split, data_dir)
    if path is not None:
        return load_questions(path, source=name, limit=limit)
    expected = Path(data_dir) / name / f"{split}.jsonl"
    if split not in spec.splits:
        raise InspoError(
            f"benchmark {name!r} split {split!r} not found at {expected}, and FlashRAG has no such split "
            f"(it has {', '.join(spec.splits)}); use split {spec.test_split!r} or put your own file there"
        )
    fix = (
        f"put FlashRAG's {spec.config}/{split}.jsonl at {expected} (fields id, question, golden_answers) "
        f"or run `{_fetch_command(name, split)}` online"
    )
    if not (hub_allowed() if allow_hub is None else allow_hub):
        reason = hub_offline_reason() or "hub access is off"
        raise InspoError(f"benchmark {name!r} split {split!r} not found ({reason}): {fix}")
    try:
        rows = download_hub_rows(spec, split)
    except HubDownloadError as e:
        raise InspoError(
            f"benchmark {name!r} split {split!r} not found locally and {HUB_REPO} failed ({e}): {fix}"
        ) from None
    return questions_from_hub_rows(spec, split, rows, limit)


def load_train_mixture(
    data_dir: str | os.PathLike = DEFAULT_DATA_DIR, limit: int | None = None, allow_hub: bool | None = None
) -> list[Question]:
    """NQ train then HotpotQA train, concatenated as Search-R1 does (the trainer shuffles).

    A `limit` is shared evenly (earlier sets take the remainder) so a small run still sees both single-hop and
    multi-hop questions instead of the first N NQ ones.
    """
    _check_limit(limit)
    questions: list[Question] = []
    for i, name in enumerate(TRAIN_MIXTURE):
        share = None if limit is None else limit // len(TRAIN_MIXTURE) + (i < limit % len(TRAIN_MIXTURE))
        if share != 0:
            questions += load_benchmark(name, "train", data_dir=data_dir, limit=share, allow_hub=allow_hub)
    return questions


def _check_limit(limit: int | None) -> None:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise InspoError(f"limit must be a positive integer or None (got {limit!r}); e.g. limit=500")
