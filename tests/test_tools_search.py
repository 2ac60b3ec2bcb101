"""grep, find and ls over a small project with hidden, ignored and nested files."""

from __future__ import annotations

from pathlib import Path

import pytest

from tempi.activities.tools import ToolContext, ToolOutcome, execute_tool


def _text(outcome: ToolOutcome) -> str:
    return "".join(getattr(block, "text", "") for block in outcome.content)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """Not a git repository: .gitignore must be honoured anyway."""
    files = {
        ".gitignore": "build/\n*.log\n",
        ".git/config": "needle in git internals\n",
        ".env": "TOKEN=needle\n",
        "README.md": "# Project\nneedle in readme\n",
        "Makefile": "all:\n",
        "build/out.txt": "needle in build output\n",
        "debug.log": "needle in a log\n",
        "src/app.py": "import os\n\ndef main():\n    return 'needle'\n",
        "src/flags.txt": "use -v for verbose\n--pre=x is a flag\n",
        "src/nested/deep.py": "needle = 1\n",
        "src/long.txt": "needle " + "z" * 800 + "\n",
        "zeta/empty/.keep": "",
    }
    for name, content in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    return tmp_path


async def _run(root: Path, tool: str, **args: object) -> ToolOutcome:
    return await execute_tool(tool, args, ToolContext(cwd=str(root)))


async def test_grep_honours_gitignore_includes_hidden_and_skips_git_dir(project: Path):
    outcome = await _run(project, "grep", pattern="needle")
    lines = _text(outcome).split("\n\n[")[0].split("\n")
    assert [line.split(":")[0] for line in lines] == [
        ".env",
        "README.md",
        "src/app.py",
        "src/long.txt",
        "src/nested/deep.py",
    ]


async def test_grep_patterns_that_look_like_flags_are_patterns(project: Path):
    for pattern, expected in [
        ("-v", "src/flags.txt:1: use -v for verbose"),
        ("--pre=x", "src/flags.txt:2: --pre=x is a flag"),
    ]:
        outcome = await _run(project, "grep", pattern=pattern)
        assert not outcome.is_error
        assert _text(outcome) == expected


async def test_grep_cuts_long_lines_and_says_so(project: Path):
    outcome = await _run(project, "grep", pattern="zzz", path="src")
    first_line = _text(outcome).split("\n")[0]
    assert first_line.startswith("long.txt:1: needle zzz")
    assert first_line.endswith("[line truncated]") and len(first_line) < 560
    assert outcome.details == {"linesTruncated": True}
    assert "500 characters" in _text(outcome)


async def test_grep_in_one_file_context_and_case(project: Path):
    outcome = await _run(project, "grep", pattern="RETURN", path="src/app.py", ignoreCase=True, context=1)
    assert _text(outcome) == "app.py-3- def main():\napp.py:4:     return 'needle'"


async def test_grep_limit_hint_and_no_matches(project: Path):
    limited = await _run(project, "grep", pattern="needle", limit=1)
    assert (
        _text(limited)
        == ".env:1: TOKEN=needle\n\n[1 matches limit reached. Use limit=2 for more, or narrow the pattern]"
    )
    none = await _run(project, "grep", pattern="no such text anywhere")
    assert not none.is_error and _text(none) == "No matches found"


async def test_grep_errors(project: Path):
    bad_regex = await _run(project, "grep", pattern="(unclosed")
    assert bad_regex.is_error and "regex" in _text(bad_regex)
    missing = await _run(project, "grep", pattern="x", path="nowhere")
    assert missing.is_error and "nowhere" in _text(missing)


async def test_find_by_name_and_by_path(project: Path):
    by_name = await _run(project, "find", pattern="*.py")
    assert _text(by_name) == "src/app.py\nsrc/nested/deep.py"
    by_path = await _run(project, "find", pattern="src/**/*.py")
    assert _text(by_path) == "src/app.py\nsrc/nested/deep.py"
    braces = await _run(project, "find", pattern="*.{md,txt}")
    assert _text(braces) == "README.md\nsrc/flags.txt\nsrc/long.txt"
    hidden = await _run(project, "find", pattern=".*")
    assert _text(hidden) == ".env\n.gitignore\nzeta/empty/.keep"


async def test_find_lists_directories_and_is_relative_to_its_path(project: Path):
    directories = await _run(project, "find", pattern="nested")
    assert _text(directories) == "src/nested/"
    within = await _run(project, "find", pattern="*", path="src")
    assert _text(within) == "app.py\nflags.txt\nlong.txt\nnested/\nnested/deep.py"


async def test_find_limit_and_errors(project: Path):
    limited = await _run(project, "find", pattern="*.py", limit=1)
    assert _text(limited).startswith("src/app.py\n\n[1 results limit reached. Use limit=2")
    not_a_dir = await _run(project, "find", pattern="*", path="README.md")
    assert not_a_dir.is_error
    missing = await _run(project, "find", pattern="*", path="nowhere")
    assert missing.is_error and "nowhere" in _text(missing)


async def test_ls_sorts_case_insensitively_and_marks_directories(project: Path):
    outcome = await _run(project, "ls")
    # ls shows everything, ignored files included.
    assert _text(outcome) == ".env\n.git/\n.gitignore\nbuild/\ndebug.log\nMakefile\nREADME.md\nsrc/\nzeta/"


async def test_ls_limit_empty_and_errors(project: Path):
    limited = await _run(project, "ls", path="src", limit=2)
    assert (
        _text(limited) == "app.py\nflags.txt\n\n[2 entries limit reached (4 in total). Use limit=4 for more]"
    )
    assert limited.details == {"entryLimitReached": 2}
    (project / "void").mkdir()
    assert _text(await _run(project, "ls", path="void")) == "(empty directory)"
    on_file = await _run(project, "ls", path="Makefile")
    assert on_file.is_error and "Not a directory" in _text(on_file)
    missing = await _run(project, "ls", path="nowhere")
    assert missing.is_error and "nowhere" in _text(missing)
