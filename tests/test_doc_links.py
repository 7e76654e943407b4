"""Links between the project's Markdown pages lead somewhere: the file exists and, for
`page.md#anchor`, the page has a heading with that GitHub anchor. docs/editor.md is the
one editor page (docs/editors.md was merged into it)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PAGES = [REPO / "README.md", REPO / "CONTRACTS.md", *sorted((REPO / "docs").glob("*.md")),
         REPO / "editors" / "vscode" / "README.md", REPO / "editors" / "neovim" / "README.md"]
LINK = re.compile(r"\]\(([^)\s]+?\.md)(#[^)\s]*)?\)")


def anchors(page: Path) -> set[str]:
    """GitHub's anchors for the page's headings: lower case, punctuation dropped, spaces as -."""
    out = set()
    for line in page.read_text(encoding="utf-8").splitlines():
        m = re.match(r"#{1,6} (.*)", line)
        if m:
            out.add(re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-"))
    return out


def test_every_link_to_a_markdown_page_finds_the_page_and_its_heading():
    broken = []
    for page in PAGES:
        for m in LINK.finditer(page.read_text(encoding="utf-8")):
            target, anchor = m.group(1), m.group(2)
            if "://" in target:
                continue
            path = (page.parent / target).resolve()
            if not path.is_file():
                broken.append(f"{page.relative_to(REPO)}: {target}")
            elif anchor and anchor[1:] not in anchors(path):
                broken.append(f"{page.relative_to(REPO)}: {target}{anchor}")
    assert broken == []


def test_there_is_one_editor_page():
    assert not (REPO / "docs" / "editors.md").exists()
    editor = anchors(REPO / "docs" / "editor.md")
    assert {"settings", "vs-code-editorsvscode", "neovim-editorsneovim", "show-run-outside-vs-code"} <= editor
    mentions = [str(p.relative_to(REPO)) for p in [*PAGES, *(REPO / "editors").rglob("*.lua")]
                if "editors.md" in p.read_text(encoding="utf-8")]
    assert mentions == []
