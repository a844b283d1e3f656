"""A Chinese room: the Chinese student copies graded like the English ones, the report in Chinese."""
import csv
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import polib
import pytest

from authoring.translation import messages as zh_messages
from authoring.translation.edition import FOLDER
from helpers.language import LANGUAGE_VARIABLE
from tests.paths import ROOT


@pytest.mark.kernel  # the grader runs notebooks
def test_a_chinese_room_is_graded_like_an_english_one_with_its_report_in_chinese(tmp_path: Path) -> None:
    from helpers.grade.sandbox import isolation

    if not isolation().available:
        pytest.skip(f"no sandbox here: {isolation().reason}")
    chinese = {entry.msgid: entry.msgstr for entry in polib.pofile(str(zh_messages.catalog_file(ROOT)))
               if entry.translated()}
    room = tmp_path / "room"
    room.mkdir()
    shutil.copy(ROOT / "solutions" / FOLDER / "00_start_here.ipynb", room / "wang_00_start_here.ipynb")
    shutil.copy(ROOT / "notebooks" / FOLDER / "00_start_here.ipynb", room / "li_00_start_here.ipynb")
    environment = {**os.environ, LANGUAGE_VARIABLE: "zh_CN", "TMPDIR": str(tmp_path)}
    result = subprocess.run([sys.executable, "-m", "helpers.grade", str(room), "--jobs", "2", "--salt", "5"],
                            env=environment, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    with (room / "grades.csv").open(encoding="utf-8", newline="") as file:
        rows = {row["notebook"]: row for row in csv.DictReader(file)}
    assert {name: row["status"] for name, row in rows.items()} == {  # machine-read columns stay English
        "wang_00_start_here.ipynb": "passed", "li_00_start_here.ipynb": "not attempted"}
    assert re.search(r"[\u4e00-\u9fff]", rows["wang_00_start_here.ipynb"]["message"])
    page = (room / "grades.html").read_text(encoding="utf-8")
    assert "<html lang='zh-CN'>" in page
    assert f"<b>✓</b> {chinese['passed']}</td>" in page
    printed = result.stdout + result.stderr
    assert "Graded 2 notebooks" not in printed and chinese["{count} passed"].format(count=1) in printed
