"""The documents stay true to the tree: every repository path that a Markdown file or .ci/run names exists."""

import re
import subprocess

import pytest

from running import ROOT

TRACKED = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
DOCUMENTS = [name for name in TRACKED if name.endswith(".md") and "node_modules" not in name] + [".ci/run"]
# Where a repository path starts: the tree's own top level (runs/ and data/ are what commands write, not the tree's).
TOP = {name.split("/")[0] for name in TRACKED} - {".gitignore"}
# A path in `code`, a Markdown link's target, or a bare word that starts at the top level: letters, digits, _-./
TOPS = "|".join(map(re.escape, TOP))
CANDIDATE = re.compile(rf"`([^`\s]+)`|\]\(([^)\s#]+)|(?<![\w./-])((?:{TOPS})/[\w./-]*[\w/])")


def named_paths(document: str) -> set[str]:
    """The repository paths `document` names (placeholders, globs and addresses left out), relative to the root."""
    text = (ROOT / document).read_text(encoding="utf-8")
    found = set()
    for match in CANDIDATE.finditer(text):
        name = next(group for group in match.groups() if group)
        if re.search(r"[*{}<>$]|://|^\.\.?$", name):
            continue
        if match.group(2):  # a link: relative to the document
            name = str((ROOT / document).parent.joinpath(name).resolve().relative_to(ROOT.resolve()))
        if name.split("/")[0] in TOP and ("/" in name or "." in name):
            found.add(name.rstrip("/"))
    return found


@pytest.mark.parametrize("document", DOCUMENTS)
def test_every_path_a_document_names_exists(document):
    missing = sorted(name for name in named_paths(document) if not (ROOT / name).exists())
    assert missing == []


def test_the_check_finds_paths_and_would_fail_on_a_missing_one(tmp_path):
    """A check that cannot fail is none: it finds the README's own paths, and a name that is not there."""
    assert {"training/README.md", "docs/design.md"} <= named_paths("README.md")
    assert not (ROOT / "training/no_such_script.py").exists()
    assert "training/no_such_script.py" in {
        next(group for group in match.groups() if group)
        for match in CANDIDATE.finditer("run `training/no_such_script.py`")
    }
