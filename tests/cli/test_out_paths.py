"""``--out`` that cannot be what a subcommand writes is refused before any work, naming the
path and what to do (issue 40, item 5: ``--out`` naming an existing file gave a traceback)."""

from __future__ import annotations

import pytest

from didmem.cli import SUBCOMMANDS, _OUT_IS, main

# the smallest command line of each subcommand that parses; the files need not exist, since
# --out is checked before the command reads anything
ARGS = {
    "demo": [], "lab": [], "power": [],
    "run": ["--config", "study.toml"], "score": ["--config", "study.toml"],
    "estimate": ["panel.parquet", "--outcome", "y"],
    "plot": ["results.parquet", "--figure", "profile"],
    "report": ["results.parquet"],
    "sensitivity": ["results.parquet", "--m", "0.1"],
    "compare": ["a.parquet", "b.parquet", "--outcome", "y"],
}


def test_every_subcommand_with_out_is_declared():
    assert set(_OUT_IS) == set(ARGS) == set(SUBCOMMANDS)


@pytest.mark.parametrize("command", [c for c, kind in _OUT_IS.items() if kind == "directory"])
def test_a_directory_out_naming_an_existing_file(command, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "taken").write_text("mine")
    assert main([command, *ARGS[command], "--out", "taken"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"didmem {command}: error: The option --out names the existing file "
                   f"'taken'; didmem {command} writes a directory there (created if missing). "
                   "Choose another path, or move the file away.")
    assert (tmp_path / "taken").read_text() == "mine"


@pytest.mark.parametrize("command", [c for c, kind in _OUT_IS.items() if kind == "file"])
def test_a_file_out_naming_a_directory(command, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "folder").mkdir()
    assert main([command, *ARGS[command], "--out", "folder"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"didmem {command}: error: The option --out names the directory "
                          "'folder'") and "Give a file's path" in err and "\n" == err[-1]
    assert err.count("\n") == 1


@pytest.mark.parametrize("command", sorted(_OUT_IS))
def test_an_out_under_a_file(command, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "plain").write_text("mine")
    assert main([command, *ARGS[command], "--out", "plain/inside/x"]) == 2
    err = capsys.readouterr().err
    assert "lies under 'plain', which is a file, not a directory" in err


def test_an_os_error_is_one_line_naming_the_file(tmp_path, capsys, monkeypatch):
    from didmem.cli import estimate

    def denied(args):
        raise PermissionError(13, "Permission denied", str(tmp_path / "r.parquet"))

    monkeypatch.setattr(estimate, "run", denied)
    code = main(["estimate", "p.parquet", "--outcome", "y", "--out", str(tmp_path / "r.parquet")])
    assert code == 2
    err = capsys.readouterr().err
    assert err == f"didmem estimate: error: Permission denied: '{tmp_path / 'r.parquet'}'\n"
