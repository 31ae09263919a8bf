"""Publish files of the repository that live outside docs/ in the site, under their own names.

A machine's findings live beside its run files (`results/<machine>/README.md`)
and the layout beside the code (`ARCHITECTURE.md`), outside `docs/`. The pages
link to them as files of the repository (`../results/h100/README.md` from
`docs/index.md`), which is right when the Markdown is read in the repository.
This MkDocs hook makes the same links right in the built site: each file of
PUBLISHED joins the site under the name such a link resolves to (`../NAME`,
relative to `docs/`) and is written to `NAME` in the site, a Markdown file as
a page (a README as its folder's index page), any other file as it is.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mkdocs.config.defaults import MkDocsConfig
    from mkdocs.structure.files import Files

# Files and folders, relative to the repository root (where mkdocs.yml is).
PUBLISHED = ("ARCHITECTURE.md", "results")
SKIPPED_SUFFIXES = (".pyc",)


def published_files(root: Path) -> list[str]:
    """The files of PUBLISHED under `root`, as paths relative to it."""
    found: list[str] = []
    for name in PUBLISHED:
        path = root / name
        candidates = sorted(path.rglob("*")) if path.is_dir() else [path]
        found += [
            candidate.relative_to(root).as_posix()
            for candidate in candidates
            if candidate.is_file() and candidate.suffix not in SKIPPED_SUFFIXES
        ]
    return found


def site_name(relative: str) -> str:
    """Where a published file goes in the site."""
    folder, _, name = relative.rpartition("/")
    if name == "README.md":
        return f"{folder}/index.html" if folder else "index.html"
    if name.endswith(".md"):
        return f"{relative[: -len('.md')]}/index.html"
    return relative


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """MkDocs hook: add the published files to the site's files."""
    from mkdocs.structure.files import File, InclusionLevel

    root = Path(config.config_file_path).parent
    for relative in published_files(root):
        files.append(
            File(
                f"../{relative}",  # the name a link from docs/ to this file resolves to
                src_dir=config.docs_dir,
                dest_dir=config.site_dir,
                use_directory_urls=config.use_directory_urls,
                dest_uri=site_name(relative),
                # a name starting with "." would be excluded by MkDocs' default rules
                inclusion=InclusionLevel.INCLUDED,
            )
        )
    return files
