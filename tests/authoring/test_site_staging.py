"""The website's source folder as ``python -m authoring.site`` stages it: no Jupyter Book needed for these."""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import nbformat
import pytest
import yaml

from authoring import release_json
from authoring.launch_cells import SETUP_TAG
from authoring.site.book_config import book_config
from authoring.site.documents import document_page
from authoring.site.execution_cache import execution_cache, fingerprint
from authoring.site.landing import LandingError, landing_page, readme_commands
from authoring.site.notebook_page import REMOVE_INPUT, notebook_page
from authoring.site.editions import course_pages, editions, languages_line
from authoring.site.words import ENGLISH_ONLY
from authoring.translation import catalog as zh_catalog
from authoring.translation import site_words
from authoring.translation.cjk import CJK, joined
from authoring.site.stage import book_files, write_tree
from tests.paths import ROOT

RELEASE = release_json.Release("https://github.com/example-org/NAME", "v1.0.0")
PAGES = course_pages(ROOT)
EDITIONS = editions(ROOT)


def solved(stem: str) -> nbformat.NotebookNode:
    return nbformat.read(str(ROOT / "solutions" / f"{stem}.ipynb"), as_version=4)


def test_the_pages_are_every_notebook_in_course_order_then_the_teachers_documents():
    assert PAGES.notebooks == sorted(path.stem for path in (ROOT / "solutions").glob("*.ipynb"))
    toc = PAGES.toc()
    files = [chapter["file"] for part in toc["parts"] for chapter in part["chapters"]]
    assert toc["root"] == "intro"
    assert files == [f"notebooks/{stem}" for stem in PAGES.notebooks] + ["docs/workshop", "docs/cheatsheet",
                                                                          "docs/hosting"]


@pytest.mark.parametrize("stem", PAGES.notebooks)
def test_a_page_is_the_solved_notebook_without_what_learners_do_not_see(stem):
    notebook = solved(stem)
    page, pictures = notebook_page(notebook, stem, RELEASE)
    assert not any(SETUP_TAG in cell.metadata.get("tags", []) for cell in page.cells)
    solved_code = [cell for cell in notebook.cells if cell.cell_type == "code"
                   and SETUP_TAG not in cell.metadata.get("tags", [])]
    page_code = [cell for cell in page.cells if cell.cell_type == "code"]
    assert [cell.source for cell in page_code] == [cell.source for cell in solved_code], "the code must be the same"
    for before, after in zip(solved_code, page_code):
        folded = bool(before.metadata.get("jupyter", {}).get("source_hidden"))
        assert (REMOVE_INPUT in after.metadata.get("tags", [])) == folded
    assert "colab.research.google.com/assets" not in page.cells[0].source, "no badge pictures from the network"
    note = page.cells[1].source
    assert f"<../student/{stem}.ipynb>" in note
    student_copy = f"notebooks/{stem}.ipynb"
    assert RELEASE.colab_url(student_copy) in note and RELEASE.binder_url(student_copy) in note
    attachments = [name for cell in notebook.cells for name in cell.get("attachments", {})]
    assert sorted(Path(path).name for path in pictures) == sorted(attachments)
    assert not any("attachment:" in cell.source for cell in page.cells)
    for path in pictures:
        assert f"({path}" in "".join(cell.source for cell in page.cells)


def test_before_a_release_a_page_offers_the_download_only():
    page, _ = notebook_page(solved("00_start_here"), "00_start_here", release_json.Release())
    assert "student notebook" in page.cells[1].source and "colab" not in page.cells[1].source.lower()


def test_the_config_has_launch_buttons_only_once_released():
    base = yaml.safe_load((ROOT / "book" / "_config.yml").read_text())
    before = book_config(base, release_json.Release(), Path("/cache"))
    assert "launch_buttons" not in before and "repository" not in before
    assert before["html"]["use_repository_button"] is False and before["execute"]["cache"] == "/cache"
    after = book_config(base, RELEASE, Path("/cache"))
    assert after["repository"] == {"url": RELEASE.repository, "branch": "v1.0.0", "path_to_book": ""}
    assert after["launch_buttons"]["colab_url"] == release_json.COLAB_SITE
    assert after["launch_buttons"]["binderhub_url"] == release_json.BINDER_SITE
    assert base == yaml.safe_load((ROOT / "book" / "_config.yml").read_text()), "the base config is not changed"


def test_the_landing_page_carries_the_readmes_parts():
    readme = (ROOT / "README.md").read_text()
    landing = landing_page((ROOT / "book" / "intro.md").read_text(), readme, PAGES.notebooks)
    assert "<!--" not in landing
    assert readme_commands(readme) in landing and "pip install -r requirements.txt" in landing
    for stem in PAGES.notebooks:
        row = re.search(rf"^\| \[`{stem}`\]\(notebooks/{stem}\.ipynb\) \| .+ \| \d+ min \|$", landing, re.MULTILINE)
        assert row, f"no map row for {stem}"
    assert "docs/workshop.md" in landing and "docs/cheatsheet.md" in landing


def test_the_landing_page_refuses_a_readme_without_a_notebooks_row():
    readme = (ROOT / "README.md").read_text()
    without = "\n".join(line for line in readme.splitlines() if not line.startswith("| `03_"))
    with pytest.raises(LandingError, match="03_inplace_version"):
        landing_page((ROOT / "book" / "intro.md").read_text(), without, PAGES.notebooks)
    with pytest.raises(LandingError, match="marker"):
        landing_page("# no markers", readme, PAGES.notebooks)


def test_documents_link_the_landing_page_for_the_readme_and_bring_the_files_they_link():
    text, needed = document_page(ROOT, "docs/hosting.md")
    assert "](../README.md)" not in text and "](../intro.md)" in text
    assert "helpers/jupyter_config/jupyter_server_config.json" in needed
    _, pictures = document_page(ROOT, "docs/cheatsheet.md")
    assert sorted(Path(path).name for path in pictures) == [
        "backward_visits.svg", "step_timeline.svg", "who_trains_whom.svg"]


@pytest.mark.parametrize("edition", EDITIONS, ids=[edition.site_folder or "en" for edition in EDITIONS])
def test_the_book_holds_every_page_and_student_copy(edition, tmp_path):
    files = book_files(ROOT, tmp_path / "cache", edition, EDITIONS)
    pages = course_pages(ROOT, edition)
    for stem in pages.notebooks:
        assert f"{edition.pages_folder}/{stem}.ipynb" in files
        assert files[f"student/{stem}.ipynb"] == (edition.student_copies(ROOT) / f"{stem}.ipynb").read_bytes()
    assert yaml.safe_load(files["_toc.yml"]) == pages.toc(edition.say)
    config = yaml.safe_load(files["_config.yml"])
    assert config["sphinx"]["config"]["language"] == edition.language
    cache = Path(config["execute"]["cache"])
    assert cache.parent == tmp_path / "cache" / edition.site_folder, "each edition has its own execution cache"


def test_the_chinese_book_is_the_chinese_notebooks_readme_and_words(tmp_path):
    english, chinese = EDITIONS
    files = book_files(ROOT, tmp_path / "cache", chinese, EDITIONS)
    toc = yaml.safe_load(files["_toc.yml"])
    assert [part["caption"] for part in toc["parts"]] == ["课程", "教师资料"]
    assert toc["parts"][0]["chapters"][0] == {"file": "notebooks/zh-CN/00_start_here"}
    assert yaml.safe_load(files["_config.yml"])["title"] == "两个模型，两个损失，一张计算图"
    landing = files["intro.md"].decode("utf-8")
    assert "<!--" not in landing and "notebooks/zh-CN/00_start_here.ipynb" in landing.split("```bash")[1]
    for unit in site_words.messages(ROOT):
        if "\n" not in unit and not unit.startswith("Two models"):
            assert unit not in landing, f"English left on the Chinese landing page: {unit!r}"
    assert not re.search(rf"[{CJK}]\n[ \t]*[{CJK}]", landing), "a line break between two Chinese characters"
    page = nbformat.reads(files["notebooks/zh-CN/02_backward_twice.ipynb"].decode("utf-8"), as_version=4)
    note = page.cells[1].source
    assert "<../../student/02_backward_twice.ipynb>" in note and "下载学生版笔记本" in note
    assert 'href="../../../notebooks/02_backward_twice.html"' in page.cells[0].source
    assert files["docs/cheatsheet.md"].decode("utf-8").startswith("# ") and "速查表" in files["docs/cheatsheet.md"].decode()
    for name, source in chinese.documents:
        text = files[f"docs/{name}.md"].decode("utf-8")
        assert (chinese.say(ENGLISH_ONLY) in text) == (source == f"docs/{name}.md"), name
    english_page = nbformat.reads(book_files(ROOT, tmp_path / "cache", english, EDITIONS)[
        "notebooks/02_backward_twice.ipynb"].decode("utf-8"), as_version=4)
    assert 'href="../zh/notebooks/zh-CN/02_backward_twice.html"' in english_page.cells[0].source


def test_a_released_chinese_page_opens_the_chinese_student_copy():
    chinese = EDITIONS[1]
    page, _ = notebook_page(solved("02_backward_twice"), "02_backward_twice", RELEASE, chinese.pages_folder,
                            chinese.say)
    student_copy = "notebooks/zh-CN/02_backward_twice.ipynb"
    note = page.cells[1].source
    assert RELEASE.colab_url(student_copy) in note and RELEASE.binder_url(student_copy) in note
    assert "需要能访问 Google" in page.cells[1].source


def test_the_languages_line_links_each_other_edition_relative_to_the_page():
    english, chinese = EDITIONS
    page = {"": "docs/workshop", "zh": "docs/workshop"}
    assert languages_line(page, english, EDITIONS) == (
        'English · <a class="course-language" href="../zh/docs/workshop.html" hreflang="zh-CN">中文</a>')
    assert languages_line(page, chinese, EDITIONS).endswith(">English</a> · 中文")
    assert languages_line({"": "intro"}, english, EDITIONS) == "", "no line where the other edition lacks the page"


def test_chinese_lines_join_without_a_space_outside_code():
    text = "第一行\n  第二行，`code`\n第三行\n- 列表\n```python\n# 中文\n# 中文\n```\nEnglish\n中文"
    assert joined(text) == "第一行第二行，`code`\n第三行\n- 列表\n```python\n# 中文\n# 中文\n```\nEnglish\n中文"


def test_each_site_unit_keeps_its_links_and_code_in_chinese():
    catalog = {entry.msgid: entry.msgstr for entry in zh_catalog.load(ROOT / site_words.CATALOG)}
    for english in site_words.messages(ROOT):
        chinese = catalog[english]
        for pattern in (r"\]\(([^)]+)\)", r"`[^`]+`", r"\{\w+\}"):
            assert sorted(re.findall(pattern, chinese)) == sorted(re.findall(pattern, english)), (english, chinese)


def test_writing_the_tree_keeps_unchanged_files_and_removes_stale_ones(tmp_path):
    assert write_tree(tmp_path, {"a.md": b"a", "sub/b.md": b"b", "old/c.md": b"c"}) == ["a.md", "old/c.md", "sub/b.md"]
    os.utime(tmp_path / "a.md", (1, 1))
    assert write_tree(tmp_path, {"a.md": b"a", "sub/b.md": b"B"}) == ["sub/b.md"]
    assert (tmp_path / "a.md").stat().st_mtime == 1, "an unchanged file keeps its time (Sphinx reads it again else)"
    assert not (tmp_path / "old").exists() and (tmp_path / "sub" / "b.md").read_bytes() == b"B"


def test_the_execution_cache_changes_with_the_helpers(tmp_path):
    course = tmp_path / "course"
    shutil.copytree(ROOT / "helpers" / "tools", course / "helpers" / "tools")
    first = execution_cache(course, tmp_path / "caches")
    first.mkdir(parents=True)
    assert fingerprint(course) == fingerprint(course)
    (course / "helpers" / "tools" / "display.py").write_text("# changed\n", encoding="utf-8")
    second = execution_cache(course, tmp_path / "caches")
    assert second != first and not first.exists(), "a change to the helpers runs every notebook again"


def test_the_publishing_workflow_builds_the_site_on_release_tags_and_publishes_it():
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "publish-site.yml").read_text())
    trigger = workflow.get("on", workflow.get(True))  # YAML 1.1 reads the key `on` as true
    assert trigger == {"push": {"tags": ["v*"]}}, "published on release tags only"
    build = workflow["jobs"]["build"]["steps"]
    commands = " ".join(step.get("run", "") for step in build)
    assert "bash book/build" in commands and "book/requirements.txt" in commands and "graphviz" in commands
    upload = [step for step in build if step.get("uses", "").startswith("actions/upload-pages-artifact")]
    assert upload and upload[0]["with"]["path"] == "book/_build/html"
    deploy = workflow["jobs"]["deploy"]
    assert deploy["needs"] == "build" and deploy["steps"][0]["uses"].startswith("actions/deploy-pages")


def test_a_released_readmes_badges_stay_off_the_landing_page():
    from authoring.launch_cells import badges_markdown, with_badges

    readme = (ROOT / "README.md").read_text()
    released = with_badges(readme, badges_markdown(RELEASE, "notebooks/00_start_here.ipynb"))
    assert "colab-badge.svg" in released
    landing = landing_page((ROOT / "book" / "intro.md").read_text(), released, PAGES.notebooks)
    assert "badge" not in landing and "<!--" not in landing


def test_the_execution_cache_changes_with_the_way_the_build_runs_the_kernels(tmp_path):
    course = tmp_path / "course"
    (course / "helpers").mkdir(parents=True)
    (course / "book").mkdir()
    (course / "book" / "build").write_text("export COURSE_STRICT=1\n")
    before = fingerprint(course)
    (course / "book" / "build").write_text("export COURSE_STRICT=0\n")
    assert fingerprint(course) != before
