"""`python -m inspo_cli.docs_gen [--check]`: write every generated page, or say which are stale (exit 1)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from inspo_cli.docs_gen.pages import DOCS, PAGES, shown, stale, stale_report, write
from inspo_cli.files import describe


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m inspo_cli.docs_gen", description=__doc__)
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 naming each stale page")
    parser.add_argument("--docs", type=Path, default=DOCS, help="the docs folder (default: the checkout's docs/)")
    args = parser.parse_args(argv)
    try:
        return _run(args)
    except (OSError, UnicodeDecodeError) as error:  # a docs folder that is a file, unwritable, a page not UTF-8
        print(
            f"error: {describe(error, 'docs folder', None if isinstance(error, OSError) else args.docs)}",
            file=sys.stderr,
        )
        return 1


def _run(args: argparse.Namespace) -> int:
    if args.check:
        paths = stale(args.docs)
        if paths:
            print(stale_report(paths, args.docs), file=sys.stderr)
            return 1
        print(f"all {len(PAGES)} generated pages are current")
        return 0
    written = write(args.docs)
    print("\n".join(f"wrote {shown(args.docs, path)}" for path in written) or f"all {len(PAGES)} pages were current")
    return 0


if __name__ == "__main__":
    sys.exit(main())
