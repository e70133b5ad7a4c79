"""spark_file_contents on a real temporary tree: text, missing paths, and what it refuses."""
from __future__ import annotations

from pathlib import Path
from typing import Any


def test_reads_text_and_reports_missing_paths_in_order(run_module: Any, tmp_path: Path) -> None:
    (tmp_path / "a").write_text("one\r\ntwo\n")
    failed, result = run_module("spark_file_contents", {"paths": [str(tmp_path / "a"), str(tmp_path / "gone")]},
                                check_mode=True)
    assert not failed and not result["changed"]
    assert result["contents"] == {str(tmp_path / "a"): "one\r\ntwo\n", str(tmp_path / "gone"): None}
    assert result["missing"] == [str(tmp_path / "gone")]


def test_refuses_a_directory_a_large_file_and_bytes_that_are_not_text(run_module: Any, tmp_path: Path) -> None:
    (tmp_path / "big").write_text("x" * 11)
    (tmp_path / "bin").write_bytes(b"\xff\xfe\x00")
    cases = {str(tmp_path): "is not a regular file", str(tmp_path / "big"): "more than max_bytes 10",
             str(tmp_path / "bin"): "is not UTF-8 text"}
    for path, message in cases.items():
        failed, result = run_module("spark_file_contents", {"paths": [path], "max_bytes": 10})
        assert failed and message in result["msg"] and path in result["msg"]
