"""Downloading the paper's benchmarks from the hub, and listing which splits are available locally.

    fetch_benchmarks(parse_benchmark_names("all"))    # online: write data/benchmarks/<name>/<split>.jsonl
    benchmark_status()                                 # one dict per usable split: where it is, how many rows

`inspo data fetch` and `inspo data list` are built on these; reading questions is `benchmarks.load_benchmark`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from inspo_cli.benchmarks import (
    BENCHMARKS,
    DEFAULT_DATA_DIR,
    DEFAULT_WORLD_DIR,
    HUB_REPO,
    TEST_BENCHMARKS,
    TRAIN_MIXTURE,
    TRAIN_MIXTURE_NAME,
    WORLD,
    WORLD_SPLITS,
    HubDownloadError,
    download_hub_rows,
    find_split_file,
    hub_allowed,
    parse_benchmark_names,
    questions_from_hub_rows,
)
from inspo_cli.errors import InspoError
from inspo_cli.files import iter_lines, open_regular
from inspo_cli.hub import hub_offline_reason
from inspo_cli.jsonio import atomic_write_jsonl
from inspo_cli.qa_files import QA_ARRAY_BYTES


def _fetch_plan(names: Iterable[str], splits: Sequence[str] | None) -> list[tuple[str, str]]:
    plan: list[tuple[str, str]] = []
    for name in parse_benchmark_names(names if isinstance(names, str) else list(names), files=False):
        if name == WORLD:
            raise InspoError(
                "'world' is the bundled synthetic world, nothing to download; "
                "regenerate it with `inspo data world --out data/world`"
            )
        pairs = (
            [(n, "train") for n in TRAIN_MIXTURE]
            if name == TRAIN_MIXTURE_NAME
            else [(name, s) for s in (splits or (BENCHMARKS[name].test_split,))]
        )
        for bench, split in pairs:
            if split not in BENCHMARKS[bench].splits:
                raise InspoError(
                    f"FlashRAG has no {split!r} split for {bench!r} (it has "
                    f"{', '.join(BENCHMARKS[bench].splits)}); pick one of those"
                )
            if (bench, split) not in plan:
                plan.append((bench, split))
    return plan


def fetch_benchmarks(
    names: Iterable[str],
    splits: Sequence[str] | None = None,
    data_dir: str | os.PathLike = DEFAULT_DATA_DIR,
    progress: Callable[[int, int], None] | None = None,
) -> list[Path]:
    """Download benchmark splits (default: the one Search-R1 reports; nq_hotpotqa = both train splits) from the
    hub and write data_dir/<name>/<split>.jsonl atomically, in FlashRAG's row format. Returns the paths written;
    `progress(done, total)` is called before the first download and after each file.
    """
    plan = _fetch_plan(names, splits)
    if not hub_allowed():
        wanted = ", ".join(f"{name}/{split}" for name, split in plan)
        raise InspoError(
            f"cannot download {wanted} from {HUB_REPO}: {hub_offline_reason()}; unset it on a machine "
            f"that reaches huggingface.co, or copy FlashRAG's <name>/<split>.jsonl files into {data_dir}/ "
            "by hand"
        )
    written: list[Path] = []
    if progress:
        progress(0, len(plan))
    for name, split in plan:
        spec, out = BENCHMARKS[name], Path(data_dir) / name / f"{split}.jsonl"
        try:
            rows = download_hub_rows(spec, split)
        except HubDownloadError as e:
            raise InspoError(
                f"could not download {name!r} split {split!r} from {HUB_REPO} ({e}); check the network "
                f"(and HF_TOKEN), or copy FlashRAG's {spec.config}/{split}.jsonl to {out} "
                "by hand"
            ) from None
        questions_from_hub_rows(spec, split, rows)  # never write rows we cannot read
        atomic_write_jsonl(out, rows)
        written.append(out)
        if progress:
            progress(len(written), len(plan))
    return written


def count_rows(path: str | os.PathLike) -> int | None:
    """Rows in a benchmark file without parsing it (JSONL: non-empty lines; parquet: its metadata)."""
    path = Path(path)
    if path.suffix.lower() == ".parquet":
        import pyarrow.parquet as pq

        return pq.ParquetFile(path).metadata.num_rows

    with open_regular(path, "QA file") as f:  # bounded like any QA file: a line or an array too big is unreadable
        is_array = f.read(4096).lstrip().startswith(b"[")
        f.seek(0)
        if not is_array:
            return sum(1 for _, line in iter_lines(f, path, "") if line.strip())
        data = f.read(QA_ARRAY_BYTES + 1) if os.fstat(f.fileno()).st_size <= QA_ARRAY_BYTES else b""
        return len(json.loads(data)) if 0 < len(data) <= QA_ARRAY_BYTES else None


def benchmark_status(
    data_dir: str | os.PathLike = DEFAULT_DATA_DIR, world_dir: str | os.PathLike = DEFAULT_WORLD_DIR
) -> list[dict]:
    """One dict per split a run can use (seven test splits, the two training splits, the world's three):
    name, display_name, split, role (test/train/world), path (None if absent), rows, expected_rows, expected_path.
    """
    entries = [(n, BENCHMARKS[n].test_split, "test", Path(data_dir) / n) for n in TEST_BENCHMARKS]
    entries += [(n, "train", "train", Path(data_dir) / n) for n in TRAIN_MIXTURE]
    entries += [(WORLD, split, "world", Path(world_dir)) for split in WORLD_SPLITS]
    status = []
    for name, split, role, folder in entries:
        spec, path, rows = BENCHMARKS.get(name), find_split_file(folder, split), None
        try:
            rows = count_rows(path) if path is not None else None
        except (OSError, ValueError, RecursionError, InspoError):  # unreadable: shown with unknown size
            pass
        status.append(
            {
                "name": name,
                "display_name": spec.display_name if spec else "World (synthetic)",
                "split": split,
                "role": role,
                "path": str(path) if path else None,
                "rows": rows,
                "expected_rows": spec.splits.get(split) if spec else None,
                "expected_path": str(folder / f"{split}.jsonl"),
            }
        )
    return status
