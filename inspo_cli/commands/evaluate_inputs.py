"""What `inspo evaluate` reads from its options, shared with `evaluate_sweep`: the methods, the instruction, the output
directory."""

from __future__ import annotations

import time
from pathlib import Path

from inspo_cli.errors import InspoError
from inspo_cli.files import INSTRUCTION_FILE_BYTES, check_can_create, read_text
from inspo_cli.registry import IMPORT_PATH_HINT, METHODS, is_import_path


def parse_methods(text: str) -> list[str]:
    names = (
        list(METHODS)
        if text.strip().lower() == "all"
        else [m.strip() if is_import_path(m) else m.strip().lower() for m in text.split(",") if m.strip()]
    )
    unknown = [m for m in names if m not in METHODS and not is_import_path(m)]
    if unknown or not names:
        raise InspoError(
            f"--method {text!r}: unknown method {', '.join(unknown) or '(none)'}; choose from "
            f"{', '.join(METHODS)} or all (comma-separated), or name your own as {IMPORT_PATH_HINT}"
        )
    for name in names:
        try:
            METHODS.resolve(name)  # an import path imports now, so a typo fails before any model loads
        except ValueError as error:
            raise InspoError(f"--method: {error}") from None
    return list(dict.fromkeys(names))


def read_instruction(value: str) -> str:
    """--instruction: a text file's contents if VALUE is an existing file, else VALUE itself. VALUE that looks like
    a path (one line, no spaces around a separator, a file suffix or a separator) but is no file is refused: a
    mistyped path must not become the instruction."""
    if not value.strip():
        raise InspoError("--instruction is empty; pass the instruction's text or a file that holds it")
    path = Path(value).expanduser()
    if len(value) < 4096 and "\n" not in value and (path.exists() or _looks_like_path(value)):
        text = read_text(path, "--instruction file", max_bytes=INSTRUCTION_FILE_BYTES).strip()
        if not text:
            raise InspoError(f"--instruction file {path} is empty; write the instruction in it")
        return text
    return value


def _looks_like_path(value: str) -> bool:
    """`prompts/nq.txt`, `~/inst.md`, `instruction.txt`: no spaces, and a separator or a file suffix. An instruction
    is prose (spaces) or has a {question} slot, so it never reads as one."""
    import re

    value = value.strip()
    if not value or any(c.isspace() for c in value) or "{" in value:
        return False
    return (
        "/" in value or "\\" in value or value.startswith("~") or re.search(r"\.[A-Za-z0-9]{1,5}$", value) is not None
    )


def out_dir_for(out: Path | None, run: Path | None) -> Path:
    """The output directory to use (created later, by `output_dir`), refused now if it could not be."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target = out if out is not None else (run / f"eval-{stamp}" if run is not None else Path("evals") / stamp)
    check_can_create(target, "--out")
    if target.exists() and any(target.iterdir()):
        raise InspoError(f"--out {target} already holds files; choose a new directory so earlier results are kept")
    return target
