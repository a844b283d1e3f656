"""What the helpers say has a current Chinese entry, and the catalog tooling notices every way it can fall behind."""
import re
import textwrap

from authoring import generate
from authoring.translation import glossary
from authoring.translation import messages as zh_messages
from tests.paths import ROOT


def test_every_message_the_helpers_mark_has_a_current_chinese_entry():
    assert zh_messages.catalog_problems(ROOT) == []


def test_the_package_ships_the_compiled_catalog_of_the_current_entries():
    catalog = zh_messages.load_catalog(ROOT)
    assert (ROOT / zh_messages.COMPILED).read_bytes() == zh_messages.compiled(catalog)


def _words(message):
    """A message's words: without its {fields}, code-like tokens (``exercises.hint("x")``, ``gradient=``),
    JupyterLab's menu paths (``Kernel → Restart Kernel and Run All Cells``), which stay English, and "NO" in
    capitals (a table's emphasis, not a name)."""
    message = re.sub(r"\{\w*\}|\S*[=()_.\[\]\\/]\S*|\bNO\b", " ", message)
    return re.sub(r"Kernel → [A-Z][\w ]*[A-Za-z]", " ", message)


def test_the_helpers_chinese_uses_the_glossarys_terms_and_keeps_every_name():
    terms = glossary.load(ROOT / generate.CATALOGS / "glossary.csv")
    pairs = [(entry.msgid[:50], _words(entry.msgid), entry.msgstr) for entry in zh_messages.load_catalog(ROOT)
             if entry.translated()]
    assert glossary.term_problems(terms, pairs) == []


def _package(root, source):
    (root / "helpers").mkdir(exist_ok=True)
    (root / "helpers" / "speaking.py").write_text("from helpers.language import marked, tr\n\n"
                                                  + textwrap.dedent(source), encoding="utf-8")


def _update(root):
    root.joinpath("i18n", "zh_CN").mkdir(parents=True, exist_ok=True)
    zh_messages.catalog_file(root).write_text(zh_messages.updated_text(root), encoding="utf-8")
    return zh_messages.load_catalog(root)


def _translate(root, table):
    catalog = zh_messages.load_catalog(root)
    for entry in catalog:
        if entry.msgid in table:
            entry.msgstr = table[entry.msgid]
    catalog.save(str(zh_messages.catalog_file(root)))


def test_the_tooling_reports_missing_stale_copied_and_mismatched_entries_and_keeps_old_chinese(tmp_path):
    _package(tmp_path, '''
        def greet(name):
            return tr("Hello, {name}: your model is ready.", name=name)
        LABEL = marked("Run the check")
    ''')
    _update(tmp_path)
    found = zh_messages.catalog_problems(tmp_path)
    assert len(found) == 2 and all(problem.endswith("is empty") for problem in found)
    _translate(tmp_path, {"Hello, {name}: your model is ready.": "你好，{who}", "Run the check": "Run the check"})
    found = zh_messages.catalog_problems(tmp_path)
    assert any("the Chinese has the fields ['who']" in problem for problem in found)
    assert any("is the English copied" in problem for problem in found)
    _translate(tmp_path, {"Hello, {name}: your model is ready.": "你好，{name}：你的模型准备好了。",
                          "Run the check": "运行检查"})
    assert zh_messages.catalog_problems(tmp_path) == []
    _package(tmp_path, '''
        def greet(name):
            return tr("Hello, {name}: your model is ready now.", name=name)
    ''')
    assert any(problem.endswith("is missing") for problem in zh_messages.catalog_problems(tmp_path))
    catalog = _update(tmp_path)
    stale = [entry for entry in catalog if not entry.obsolete]
    assert len(stale) == 1 and stale[0].fuzzy and stale[0].msgstr == "你好，{name}：你的模型准备好了。"
    assert stale[0].previous_msgid == "Hello, {name}: your model is ready."
    assert [entry.msgid for entry in catalog if entry.obsolete] == ["Run the check"]
    assert any("is stale" in problem for problem in zh_messages.catalog_problems(tmp_path))
    assert "你好" not in zh_messages.compiled(catalog).decode("utf-8", "replace")  # a stale entry stays English
    assert zh_messages.updated_text(tmp_path) == zh_messages.catalog_file(tmp_path).read_text(encoding="utf-8")


def test_a_marked_message_that_cannot_be_catalogued_is_reported(tmp_path):
    _package(tmp_path, '''
        def diagnose(model, other):
            first = tr(f"{model} got the gradient of {other}.")
            second = tr("{model} got the gradient of {other}.", model=model)
            return first + second
    ''')
    found = zh_messages.extract(tmp_path)[1]
    assert len(found) == 2
    assert "one string literal" in found[0]
    assert "fields ['model', 'other'] are not the values passed ['model']" in found[1]
