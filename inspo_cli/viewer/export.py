"""`inspo view --export DIR`: every page and figure of the site written as static files (the same relative links
work from a folder), built in a hidden sibling and moved into place whole (`files.replaced_dir`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from inspo_cli.errors import InspoError
from inspo_cli.files import replaced_dir
from inspo_cli.viewer.site import Site

MARK = ".inspo-view-export"  # in an export: what `--export` may replace


def check_replaceable(shown: Path, location: Path) -> None:
    """An existing DIR is replaced only when it is empty or an earlier export (never what the toolkit did not write)."""
    if not location.exists():
        return
    if not location.is_dir() or location.is_symlink():
        raise InspoError(f"--export {shown}: is not a directory; choose a new folder")
    if any(location.iterdir()) and not (location / MARK).is_file():
        raise InspoError(f"--export {shown}: holds files that are not an earlier export; choose a new or empty folder")


def export_site(site: Site, out: Path, tick: Callable[[str], None] = lambda path: None) -> int:
    """Write every page; returns how many files were written."""
    written = 0
    with replaced_dir(out, "--export", check_replaceable) as building:
        (building / MARK).write_text("written by inspo view --export; a new export replaces this folder\n")
        for path in site.paths():
            response = site.get(path)
            if response is None:
                continue
            target = building / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(response.body)
            written += 1
            tick(path)
    return written
