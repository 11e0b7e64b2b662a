"""The paper's QA benchmarks, read exactly the way Search-R1 reads them.

INSPO follows Search-R1: train on the NQ + HotpotQA training sets, report exact match on seven test sets, all
from FlashRAG's preprocessed copies on the Hugging Face hub. This module turns a benchmark name into `Question`s:
from a local file when there is one (data/benchmarks/<name>/<split>.jsonl, .parquet or .json), else from the hub,
else with a one-line error saying where to put the file (downloads and the status listing: `benchmark_fetch`);
`world`, the bundled synthetic world, from data/world/<split>.jsonl in the same row format.

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
import json
import os
import shlex
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inspo_cli import hub
from inspo_cli.errors import InspoError
from inspo_cli.files import iter_lines, open_regular, user_file
from inspo_cli.hub import hub_offline_reason

HUB_REPO = "RUC-NLPIR/FlashRAG_datasets"
WORLD = "world"
TRAIN_MIXTURE_NAME = "nq_hotpotqa"  # the recipe's `data.train` value for the paper's training mixture
TRAIN_MIXTURE = ("nq", "hotpotqa")
DEFAULT_DATA_DIR = "data/benchmarks"
QA_ARRAY_BYTES = 1 << 30  # a QA file that is one JSON array is read whole; FlashRAG's splits are JSONL, ~100 MB at most
DEFAULT_WORLD_DIR = "data/world"
FILE_SUFFIXES = (".jsonl", ".parquet", ".json")  # looked for in this order
WORLD_SPLITS = ("train", "dev", "test")
_CORE_FIELDS = ("id", "question", "golden_answers", "metadata")


@dataclass(frozen=True)
class Question:
    """One QA item. `id` is unique within `source` (the benchmark name); `key` is unique across sets."""

    id: str
    question: str
    golden_answers: tuple[str, ...]
    source: str
    metadata: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)  # every other field of the row

    @property
    def key(self) -> str:
        """'<source>:<id>', e.g. 'nq:test_0': how the instruction population and the replay buffer name a question."""
        return f"{self.source}:{self.id}"

    @property
    def category(self) -> str:  # what `parents: pareto` compares on: the row's `type` (the world's), else benchmark
        return kind if isinstance(kind := self.metadata.get("type"), str) and kind else self.source


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


# -- reading files ----------------------------------------------------------------------------------------------


def local_path(name: str, split: str, data_dir: str | os.PathLike = DEFAULT_DATA_DIR) -> Path | None:
    """The first of data_dir/<name>/<split>.jsonl, .parquet, .json that exists; None if none does."""
    return find_split_file(Path(data_dir) / name, split)


def find_split_file(folder: Path, split: str) -> Path | None:
    """The first of folder/<split>.jsonl, .parquet, .json that exists; None if none does."""
    for suffix in FILE_SUFFIXES:
        if (folder / f"{split}{suffix}").is_file():
            return folder / f"{split}{suffix}"
    return None


def load_questions(path: str | os.PathLike, source: str | None = None, limit: int | None = None) -> list[Question]:
    """Validated questions from a FlashRAG-format JSONL, JSON or parquet file; `source` defaults to its folder name."""
    path, wanted = Path(path), "give a FlashRAG JSONL/parquet file with fields id, question, golden_answers"
    if not path.exists():
        raise InspoError(f"{path}: no such file; {wanted}")
    if not path.is_file():  # a FIFO would block the open, a device never end
        kind = "is a directory" if path.is_dir() else "not a regular file (a FIFO, a socket or a device)"
        raise InspoError(f"QA file {path}: {kind}; {wanted}")
    if path.suffix.lower() not in FILE_SUFFIXES:
        raise InspoError(
            f"{path}: unsupported file type {path.suffix!r}; convert it to one of {', '.join(FILE_SUFFIXES)}"
        )
    questions = _questions_from_rows(_read_rows(path), source or path.parent.name, path.stem, limit)
    if not questions and limit != 0:  # scored, an empty file would be EM 0.0 over n = 0 and enter the average
        raise InspoError(f"QA file {path}: holds no questions (empty or blank); {wanted}")
    return questions


def _read_rows(path: Path) -> Iterator[tuple[str, Any]]:
    """(location, row) pairs: 'FILE:LINE' for JSON lines (streamed, each bounded), 'FILE item N' / 'FILE row N'."""
    if path.suffix.lower() == ".parquet":
        yield from _parquet_rows(path)
        return
    with user_file(path, "QA file"), open_regular(path, "QA file") as f:
        is_array = f.read(4096).lstrip().startswith(b"[")
        f.seek(0)
        if is_array:
            yield from _array_rows(path, f)
            return
        for lineno, line in iter_lines(f, path, "fix or remove that line"):
            if not line.strip():
                continue
            try:
                row = json.loads(line.decode("utf-8"))
            except UnicodeDecodeError as e:
                raise InspoError(
                    f"QA file {path}: not UTF-8 text (byte 0x{line[e.start : e.start + 1].hex()} on line "
                    f"{lineno}); save it as UTF-8"
                ) from None
            except (json.JSONDecodeError, RecursionError) as e:
                why = getattr(e, "msg", "nested too deep to read")
                raise InspoError(f"{path}:{lineno}: not valid JSON ({why}); fix or remove that line") from None
            yield f"{path}:{lineno}", row


def _array_rows(path: Path, f) -> Iterator[tuple[str, Any]]:
    data = f.read(QA_ARRAY_BYTES + 1) if os.fstat(f.fileno()).st_size <= QA_ARRAY_BYTES else None
    if data is None or len(data) > QA_ARRAY_BYTES:
        raise InspoError(
            f"QA file {path}: a JSON array of more than {QA_ARRAY_BYTES:,} bytes; convert it to JSONL "
            "(one row per line), which is read a line at a time"
        )
    try:
        yield from ((f"{path} item {i}", row) for i, row in enumerate(json.loads(data.decode("utf-8")), start=1))
    except (json.JSONDecodeError, RecursionError) as e:
        where, why = (f":{e.lineno}", e.msg) if isinstance(e, json.JSONDecodeError) else ("", "nested too deep")
        raise InspoError(f"{path}{where}: not valid JSON ({why}); fix the file or convert it to JSONL") from None


def _parquet_rows(path: Path) -> Iterator[tuple[str, Any]]:
    import pyarrow.parquet as pq  # only needed for parquet files

    try:
        rows = (row for batch in pq.ParquetFile(path).iter_batches(batch_size=4096) for row in batch.to_pylist())
        for index, row in enumerate(rows, start=1):
            yield f"{path} row {index}", row
    except (OSError, ValueError) as e:  # pyarrow's ArrowInvalid is a ValueError
        raise InspoError(f"{path}: not a readable parquet file ({_first_line(e)}); rewrite it or use JSONL") from None


def _questions_from_rows(rows: Iterable[tuple[str, Any]], source: str, stem: str, limit: int | None) -> list[Question]:
    questions: list[Question] = []
    seen: dict[str, str] = {}
    for index, (where, row) in enumerate(rows, start=1):
        if limit is not None and len(questions) >= limit:
            break
        question = _question_from_row(row, where, source, fallback_id=f"{stem}_{index - 1}")
        if question.id in seen:
            raise InspoError(
                f"{where}: id {question.id!r} already used at {seen[question.id]}; ids must be unique, "
                "fix or remove one of the rows"
            )
        seen[question.id] = where
        questions.append(question)
    return questions


def _question_from_row(row: Any, where: str, source: str, fallback_id: str) -> Question:
    if not isinstance(row, dict):
        raise InspoError(
            f"{where}: expected an object with fields id, question, golden_answers, got {type(row).__name__}"
        )
    text = row.get("question")
    if not isinstance(text, str) or not text.strip():
        hint = " (this looks like Search-R1's processed parquet; use FlashRAG's rows)" if "reward_model" in row else ""
        raise InspoError(f"{where}: field 'question' must be a non-empty string, got {_show(text)}{hint}; fix that row")
    answers = _golden_answers(row, where)
    raw_id = row.get("id")
    if raw_id is None or raw_id == "":
        qid = fallback_id  # FlashRAG's own ids look like this: "test_0", "train_12"
    elif isinstance(raw_id, (str, int)) and not isinstance(raw_id, bool):
        qid = str(raw_id)
    else:
        raise InspoError(f"{where}: field 'id' must be a string or an integer, got {_show(raw_id)}; fix that row")
    metadata = {k: v for k, v in row.items() if k not in _CORE_FIELDS}
    nested = row.get("metadata")
    if isinstance(nested, dict):
        metadata = {**nested, **metadata}
    elif nested is not None:
        metadata["metadata"] = nested
    return Question(qid, text.strip(), answers, source, metadata)


def _golden_answers(row: dict, where: str) -> tuple[str, ...]:
    value = row.get("golden_answers")
    if value is None:
        other = next((k for k in ("answers", "answer", "golden_answer") if k in row), None)
        hint = f"rename field {other!r} to 'golden_answers'" if other else "add it as a list of answer strings"
        raise InspoError(f"{where}: field 'golden_answers' is missing; {hint}")
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not items:
        raise InspoError(
            f"{where}: field 'golden_answers' must be a non-empty list of strings or a string, "
            f"got {_show(value)}; fix that row"
        )
    answers = []
    for i, item in enumerate(items):
        if isinstance(item, (int, float)) and not isinstance(item, bool):
            item = str(item)  # e.g. years stored as numbers
        if not isinstance(item, str) or not item.strip():
            raise InspoError(
                f"{where}: field 'golden_answers' item {i} must be a non-empty string, got {_show(item)}; fix that row"
            )
        answers.append(item)
    return tuple(answers)


def _show(value: Any) -> str:
    text = repr(value)
    return f"{text[:40]}... ({type(value).__name__})" if len(text) > 40 else f"{text} ({type(value).__name__})"


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0] if text else 'no message'}"


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
        raise HubDownloadError(_first_line(e)) from e


def questions_from_hub_rows(
    spec: BenchmarkSpec, split: str, rows: list[dict], limit: int | None = None
) -> list[Question]:
    """Validated questions from rows `download_hub_rows` returned; errors name HUB_REPO/<config>/<split>.jsonl:ROW."""
    located = ((f"{HUB_REPO}/{spec.config}/{split}.jsonl:{i}", row) for i, row in enumerate(rows, start=1))
    return _questions_from_rows(located, spec.name, split, limit)


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
