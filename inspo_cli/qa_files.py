"""A QA file in FlashRAG's row format, read into validated `Question`s: JSON lines (streamed, each line bounded), one
JSON array, or Parquet; rows {"id", "question", "golden_answers": [str], "metadata": {...}}, any other field kept as
metadata. Every damaged row is one `InspoError` naming the file and the line or row, and the fix. Which file a
benchmark name means, and the hub, are `benchmarks`' concern.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inspo_cli.errors import InspoError
from inspo_cli.files import iter_lines, open_regular, user_file

QA_ARRAY_BYTES = 1 << 30  # a QA file that is one JSON array is read whole; FlashRAG's splits are JSONL, ~100 MB at most
FILE_SUFFIXES = (".jsonl", ".parquet", ".json")  # looked for in this order
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
    questions = questions_from_rows(_read_rows(path), source or path.parent.name, path.stem, limit)
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
        raise InspoError(f"{path}: not a readable parquet file ({first_line(e)}); rewrite it or use JSONL") from None


def questions_from_rows(rows: Iterable[tuple[str, Any]], source: str, stem: str, limit: int | None) -> list[Question]:
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


def first_line(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0] if text else 'no message'}"
