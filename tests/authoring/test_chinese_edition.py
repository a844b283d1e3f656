"""The Chinese edition: written from the English notebooks and the catalogs, code unchanged, never silently behind."""
import re
import shutil

import nbformat
import pytest

from authoring import generate, release_json
from authoring.launch_cells import SETUP_TAG, language_line, setup_source
from authoring.translation import catalog as zh_catalog
from authoring.translation import glossary
from authoring.translation import messages as zh_messages
from authoring.translation import sheet as zh_sheet
from authoring.translation.cjk import joined
from authoring.translation.printed import SUFFIX as PRINTED_SUFFIX
from authoring.translation.printed import fields as printed_fields
from authoring.translation.printed import printed_strings
from authoring.translation.edition import FOLDER, LANGUAGE, NOT_TRANSLATED, STALE, english_code, skeleton, title_text
from tests.paths import ROOT

STEMS = generate.translated_stems(ROOT)
GLOSSARY = glossary.load(ROOT / generate.CATALOGS / "glossary.csv")


def _read(path):
    return nbformat.read(str(path), as_version=4)


def _entries(stem):
    """(context, English, Chinese) of each entry of a notebook's catalog."""
    catalog = zh_catalog.load(generate.catalog_path(ROOT, stem))
    return [(context, entry.msgid, entry.msgstr) for context, entry in zh_catalog.by_context(catalog).items()]


def test_at_least_the_first_notebook_is_translated():
    assert "00_start_here" in STEMS


@pytest.mark.parametrize("copy_folder", ["solutions", "notebooks"])
@pytest.mark.parametrize("stem", STEMS)
def test_every_code_cell_is_the_english_one_but_what_it_shows_a_learner(stem, copy_folder):
    english = _read(ROOT / copy_folder / f"{stem}.ipynb")
    chinese = _read(ROOT / copy_folder / FOLDER / f"{stem}.ipynb")
    titles = {context: (english_text, chinese_text) for context, english_text, chinese_text in _entries(stem)}
    assert [(cell.cell_type, cell.id) for cell in chinese.cells] == [(cell.cell_type, cell.id)
                                                                      for cell in english.cells]
    changed = 0
    for mine, theirs in zip(chinese.cells, english.cells):
        assert mine.metadata == theirs.metadata
        if theirs.cell_type != "code":
            assert mine.source != theirs.source, f"cell {theirs.id} is still English"
            continue
        if theirs.id == "colab-setup":  # the same, but for the line that chooses the helpers' language
            line = language_line(LANGUAGE)
            assert mine.source.partition("\n")[2].replace(line, "", 1) == theirs.source.partition("\n")[2]
            assert mine.source.count(line) == 1
            continue
        title = title_text(theirs)
        if title is not None:
            english_title, chinese_title = titles[theirs.id + zh_catalog.TITLE_SUFFIX]
            assert english_title == title
            assert mine.source != theirs.source
            assert english_code(mine.source, english_title, chinese_title) == theirs.source
            changed += 1
        else:
            mine_skeleton, mine_shown = skeleton(mine.source)
            theirs_skeleton, theirs_shown = skeleton(theirs.source)
            assert mine_skeleton == theirs_skeleton
            keys = [f"{theirs.id}{zh_catalog.TEXT_SUFFIX}{number}" for number in range(len(theirs_shown))]
            assert theirs_shown == [titles[key][0] for key in keys]
            assert mine_shown == [titles[key][1] for key in keys]
            mine_printed, theirs_printed = printed_strings(mine.source), printed_strings(theirs.source)
            keys_printed = [f"{theirs.id}{PRINTED_SUFFIX}{number}" for number in range(len(theirs_printed))]
            assert [one.english for one in theirs_printed] == [titles[key][0] for key in keys_printed]
            assert [one.english for one in mine_printed] == [titles[key][1] for key in keys_printed]
            changed += len(keys)
    assert changed == sum(1 for cell in english.cells if title_text(cell) is not None) + sum(
        len(zh_catalog.learner_strings(cell.source)) for cell in english.cells if cell.cell_type == "code")


@pytest.mark.parametrize("stem", STEMS)
def test_the_exercises_and_their_solutions_are_the_english_ones(stem):
    english, chinese = {}, {}
    generate.make_student_notebook(_read(ROOT / "solutions" / f"{stem}.ipynb"), "x.ipynb", english)
    generate.make_student_notebook(_read(ROOT / "solutions" / FOLDER / f"{stem}.ipynb"), "x.ipynb", chinese)
    assert english and chinese == english


@pytest.mark.parametrize("stem", [*STEMS, generate.SHARED_CATALOG])
def test_the_catalog_uses_the_glossarys_terms_and_keeps_every_name(stem):
    pairs = [(f"{stem} {context}", _without_fields(english) if PRINTED_SUFFIX in context else english, chinese)
             for context, english, chinese in _entries(stem)]
    assert glossary.term_problems(GLOSSARY, pairs) == []


def _without_fields(english):
    """A printed f-string's English without its {fields}: code, not words (``{stale[0].version_saved}``)."""
    for field in printed_fields(english):
        english = english.replace(field, " ")
    return english


@pytest.mark.parametrize("stem", STEMS)
def test_each_terms_first_use_carries_its_english(stem):
    chinese = _read(ROOT / "solutions" / FOLDER / f"{stem}.ipynb")
    markdown = [cell.source for cell in chinese.cells if cell.cell_type == "markdown"]
    assert glossary.first_use_problems(GLOSSARY, stem, markdown) == []


def test_the_glossary_checks_can_fail():
    pairs = [("a", "the computation graph and a version counter", "计算图和版本号计数器"),
             ("b", "an in-place write, the `backward pass` in code", "原地写入")]
    found = glossary.term_problems(GLOSSARY, pairs)
    assert any("'version counter'" in problem and "lacks '版本计数器'" in problem for problem in found)
    assert any("'版本号计数器'" in problem for problem in found)
    assert any("'in-place'" in problem and "lacks '就地'" in problem for problem in found)
    assert any("'原地'" in problem for problem in found)
    assert not any("backward pass" in problem for problem in found)  # code spans are not prose
    assert glossary.term_problems(GLOSSARY, [("c", "autograd.grad did not run it", "autograd.grad 没有运行它")]) == []
    quoted = ("q", "It raises *Trying to backward through the graph a second time* here.",
              "这里抛出 *Trying to backward through the graph a second time*。")
    assert glossary.term_problems(GLOSSARY, [quoted]) == []  # a PyTorch message kept in English
    assert glossary.term_problems(GLOSSARY, [(quoted[0], quoted[1] + " A gradient.", quoted[2])])
    assert glossary.first_use_problems(GLOSSARY, "n", ["计算图是什么？", "计算图（computation graph）"])
    assert glossary.first_use_problems(GLOSSARY, "n", ["计算图（Computation graphs）是什么？计算图"]) == []
    assert glossary.first_use_problems(GLOSSARY, "n", ["# 计算图\n\n计算图（computation graph）是什么？"]) == []


@pytest.fixture
def course(tmp_path):
    """A copy of the course's notebook 00, its catalogs and release.json, generated."""
    for name in ("release.json",):
        shutil.copy(ROOT / name, tmp_path / name)
    (tmp_path / "solutions").mkdir()
    shutil.copy(ROOT / "solutions" / "00_start_here.ipynb", tmp_path / "solutions")
    shutil.copytree(ROOT / generate.CATALOGS, tmp_path / generate.CATALOGS)
    for path in (tmp_path / generate.CATALOGS).glob("*.po"):
        if path.stem not in ("00_start_here", generate.SHARED_CATALOG):
            path.unlink()
    assert generate.main(["--root", str(tmp_path)]) == 0
    assert generate.check(tmp_path) == []
    return tmp_path


def _edit_catalog(course, edit):
    path = generate.catalog_path(course, "00_start_here")
    catalog = zh_catalog.load(path)
    edit(catalog)
    path.write_text(zh_catalog.po_text(catalog), encoding="utf-8")


def test_check_fails_on_a_missing_entry(course):
    _edit_catalog(course, lambda catalog: catalog.remove(zh_catalog.by_context(catalog)["b26d5bbb"]))
    assert any("entry b26d5bbb is missing" in problem for problem in generate.check(course))
    generate.main(["--root", str(course)])
    cell = next(cell for cell in _read(course / "solutions" / FOLDER / "00_start_here.ipynb").cells
                if cell.id == "b26d5bbb")
    assert cell.source.startswith(NOT_TRANSLATED) and "Check your environment" in cell.source


def test_check_fails_on_an_empty_entry_and_a_cell_that_no_longer_exists(course):
    def edit(catalog):
        zh_catalog.by_context(catalog)["216205b5#title"].msgstr = ""
        catalog.append(zh_catalog.polib.POEntry(msgctxt="deadbeef", msgid="Gone.", msgstr="没了。"))
    _edit_catalog(course, edit)
    found = generate.check(course)
    assert any("entry 216205b5#title is empty" in problem for problem in found)
    assert any("entry deadbeef is for a cell that no longer exists" in problem for problem in found)


def test_a_changed_english_cell_keeps_the_old_chinese_marked_stale_until_updated(course):
    solution_path = course / "solutions" / "00_start_here.ipynb"
    solution = _read(solution_path)
    cell = next(cell for cell in solution.cells if cell.id == "2b77f41f")
    old_english = cell.source
    cell.source += "\nA new sentence."
    nbformat.write(solution, str(solution_path))
    assert any("entry 2b77f41f is stale" in problem for problem in generate.check(course))
    old_chinese = zh_catalog.by_context(zh_catalog.load(generate.catalog_path(course, "00_start_here")))[
        "2b77f41f"].msgstr
    assert generate.main(["--root", str(course), "--update-catalogs"]) == 0
    entry = zh_catalog.by_context(zh_catalog.load(generate.catalog_path(course, "00_start_here")))["2b77f41f"]
    assert entry.fuzzy and entry.msgid == cell.source and entry.msgstr == old_chinese
    assert entry.previous_msgid == old_english
    assert "#| msgid" in generate.catalog_path(course, "00_start_here").read_text(encoding="utf-8")
    assert any("entry 2b77f41f is stale" in problem for problem in generate.check(course))
    generate.main(["--root", str(course)])
    written = next(cell for cell in _read(course / "solutions" / FOLDER / "00_start_here.ipynb").cells
                   if cell.id == "2b77f41f")
    assert written.source == STALE + joined(old_chinese)

    def updated(catalog):
        entry = zh_catalog.by_context(catalog)["2b77f41f"]
        entry.msgstr = old_chinese + "\n新的一句。"
        entry.flags.remove("fuzzy")
        entry.previous_msgid = None
    _edit_catalog(course, updated)
    generate.main(["--root", str(course)])
    assert generate.check(course) == []


def test_check_fails_on_an_edited_chinese_notebook_and_one_without_a_catalog(course):
    path = course / "notebooks" / FOLDER / "00_start_here.ipynb"
    notebook = _read(path)
    notebook.cells[0].source += "\n多了一句。"
    nbformat.write(notebook, str(path))
    shutil.copy(path, path.with_name("01_graph_and_saved_tensors.ipynb"))
    found = generate.check(course)
    assert f"notebooks/{FOLDER}/00_start_here.ipynb is stale" in found
    assert any(problem.startswith(f"notebooks/{FOLDER}/01_graph_and_saved_tensors.ipynb has no solution")
               for problem in found)


def test_updating_the_catalogs_twice_changes_nothing(course):
    before = {path: path.read_bytes() for path in (course / generate.CATALOGS).glob("*.po")}
    assert generate.update_catalogs(course, []) == []
    assert {path: path.read_bytes() for path in (course / generate.CATALOGS).glob("*.po")} == before


def test_after_a_release_the_chinese_copies_open_themselves_and_install_the_pinned_helpers(course):
    release = release_json.Release(repository="https://github.com/example-org/two-losses-course", ref="v1.2.0")
    release_json.save(course, release)
    assert generate.main(["--root", str(course)]) == 0
    for folder in ("solutions", "notebooks"):
        path = f"{folder}/{FOLDER}/00_start_here.ipynb"
        notebook = _read(course / path)
        assert release.colab_url(path) in notebook.cells[0].source
        assert release.binder_url(path) in notebook.cells[0].source
        assert release.kaggle_url(path) in notebook.cells[0].source
        assert notebook.cells[0].source.startswith("# 00 · 从这里开始\n")
        setup = notebook.cells[1]
        assert setup.metadata["tags"] == [SETUP_TAG] and setup.source.startswith("#@title 准备工作")
        assert setup.source.partition("\n")[2] == setup_source(release, LANGUAGE).partition("\n")[2]
    assert generate.check(course) == []


def _commands(readme_text):
    """The commands of a README's first bash block, comments left out."""
    block = readme_text.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line.split("#", 1)[0].strip() for line in block.splitlines() if line.strip()]


def test_the_chinese_readme_gives_the_same_two_commands_opening_the_chinese_notebook_and_a_mirror_form():
    english = (ROOT / "README.md").read_text(encoding="utf-8")
    chinese = (ROOT / generate.ZH_README).read_text(encoding="utf-8")
    install, test = _commands(english)
    assert _commands(chinese) == [f"{install} notebooks/{FOLDER}/00_start_here.ipynb", test]
    assert "-i https://pypi.tuna.tsinghua.edu.cn/simple" in chinese and "Google" in chinese
    assert "ModelScope" in chinese and "PAI-DSW" in chinese
    assert "[中文](README.zh-CN.md)" in "\n".join(english.splitlines()[:4])
    assert (ROOT / "notebooks" / FOLDER / "00_start_here.ipynb").is_file()


def test_after_a_release_the_chinese_readme_opens_each_chinese_notebook_on_colab_binder_and_kaggle(course):
    shutil.copy(ROOT / generate.ZH_README, course / generate.ZH_README)
    release = release_json.Release(repository="https://github.com/example-org/two-losses-course", ref="v1.2.0")
    assert generate.main(["--root", str(course)]) == 0
    before = (course / generate.ZH_README).read_text(encoding="utf-8")
    release_json.save(course, release)
    assert f"{generate.ZH_README} is stale" in generate.check(course)
    assert generate.main(["--root", str(course)]) == 0
    readme = (course / generate.ZH_README).read_text(encoding="utf-8")
    path = f"notebooks/{FOLDER}/00_start_here.ipynb"
    row = next(line for line in readme.splitlines() if line.startswith("| `00_start_here`"))
    later = next(line for line in readme.splitlines() if line.startswith("| `01_graph_and_saved_tensors`"))
    for url in (release.colab_url(path), release.binder_url(path), release.kaggle_url(path)):
        assert url in row and url in "\n".join(readme.splitlines()[:5])
    assert later.rstrip().endswith("|  |")  # that notebook is not in this course copy
    assert "首次发布之后" in before and "首次发布之后" not in row


def test_a_card_string_or_title_that_is_not_current_stays_english(course):
    def stale(catalog):
        for entry in catalog:
            if entry.msgctxt == "216205b5#title":
                entry.flags.append("fuzzy")
    _edit_catalog(course, stale)
    generate.main(["--root", str(course)])
    cell = next(cell for cell in _read(course / "solutions" / FOLDER / "00_start_here.ipynb").cells
                if cell.id == "216205b5")
    assert cell.source.startswith("#@title ✓ 检查：this machine can run the course")
    assert any("entry 216205b5#title is stale" in problem for problem in generate.check(course))


def test_a_pasted_cell_keeps_its_chinese_and_a_deleted_ones_stays_obsolete(course):
    solution_path = course / "solutions" / "00_start_here.ipynb"
    solution = _read(solution_path)
    moved = next(cell for cell in solution.cells if cell.id == "b26d5bbb")
    moved.id = "1234abcd"  # cut and pasted back: a new id
    solution.cells = [cell for cell in solution.cells if cell.id != "2b77f41f"]
    nbformat.write(solution, str(solution_path))
    assert generate.main(["--root", str(course), "--update-catalogs"]) == 0
    catalog = zh_catalog.load(generate.catalog_path(course, "00_start_here"))
    assert zh_catalog.by_context(catalog)["1234abcd"].msgstr.startswith("## 1. 检查你的环境")
    obsolete = [entry for entry in catalog if entry.obsolete]
    assert [entry.msgctxt for entry in obsolete] == ["2b77f41f"]
    assert generate.main(["--root", str(course)]) == 0 and generate.check(course) == []
    assert generate.update_catalogs(course, []) == []


def test_check_reports_a_card_string_it_cannot_translate_and_english_copied_as_chinese(course):
    solution_path = course / "solutions" / "00_start_here.ipynb"
    solution = _read(solution_path)
    solution.cells.append(nbformat.v4.new_code_cell(
        'predict(f"What now, {1}?", {"A": 1}, run=len, expected=1, explanation="Because " + "so.")'))
    nbformat.write(solution, str(solution_path))

    def copied(catalog):
        zh_catalog.by_context(catalog)["a8ce3476"].msgstr = zh_catalog.by_context(catalog)["a8ce3476"].msgid
    _edit_catalog(course, copied)
    found = generate.check(course)
    assert sum("is not one string literal" in problem for problem in found) == 2
    assert any("entry a8ce3476 is the English copied" in problem for problem in found)


def test_a_catalog_whose_notebook_is_gone_is_skipped_by_update_and_reported_by_check(course):
    (course / "solutions" / "00_start_here.ipynb").rename(course / "solutions" / "00_start.ipynb")
    assert generate.update_catalogs(course, []) == []
    assert any("00_start_here.po has no solution notebook" in problem for problem in generate.check(course))


def test_the_glossary_keeps_names_and_counts_only_marked_quotes():
    kaggle = ("t", "Set-up for Google Colab and Kaggle: run it first.", "Google Colab 上的准备工作：请先运行它。")
    assert any("names Kaggle" in problem for problem in glossary.term_problems(GLOSSARY, [kaggle]))
    unmarked = ("u", "Run the next cell to see the gradient.", "运行 Run the next cell to see the gradient.")
    assert any("lacks '梯度'" in problem for problem in glossary.term_problems(GLOSSARY, [unmarked]))


def _cells(row):
    """A table row's cells (``|`` inside code spans does not split)."""
    return [cell.strip() for cell in re.split(r"\|(?=(?:[^`]*`[^`]*`)*[^`]*$)", row.strip().strip("|"))]


def test_the_chinese_cheat_sheet_carries_each_english_units_code_images_and_proofs():
    """Unit for unit, the Chinese sheet has the English one's code spans (error lines included), figures (drawn in
    Chinese) and proof references, so the English sheet's live checks of them hold for it too."""
    english = zh_sheet.units((ROOT / zh_sheet.ENGLISH).read_text(encoding="utf-8"))
    chinese = zh_sheet.units((ROOT / zh_sheet.CHINESE).read_text(encoding="utf-8"))
    assert [translated for _, translated in chinese] == [translated for _, translated in english]
    for (theirs, translated), (mine, _) in zip(english, chinese):
        if not translated:
            assert mine == theirs
            continue
        assert mine != theirs, f"still English: {theirs[:60]}"
        assert re.findall(r"`[^`]+`", mine) == re.findall(r"`[^`]+`", theirs), theirs[:60]
        theirs_images = re.findall(r"\]\(([^)]+)\)", zh_sheet.with_chinese_figures(theirs))  # the Chinese drawings
        assert re.findall(r"\]\(([^)]+)\)", mine) == theirs_images, theirs[:60]
        if theirs.startswith("|"):
            assert len(_cells(mine)) == len(_cells(theirs)) and _cells(mine)[-1].replace("证明", "Proof") == \
                _cells(theirs)[-1], theirs[:60]


def test_the_chinese_cheat_sheet_uses_the_glossarys_terms_with_their_english_on_first_use():
    catalog = zh_messages.present(ROOT / zh_sheet.CATALOG)
    pairs = [(entry.msgid[:40], entry.msgid, entry.msgstr) for entry in catalog if entry.translated()]
    assert glossary.term_problems(GLOSSARY, pairs) == []
    assert glossary.first_use_problems(GLOSSARY, "cheatsheet.zh-CN.md", [(ROOT / zh_sheet.CHINESE).read_text(
        encoding="utf-8")]) == []
