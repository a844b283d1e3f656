"""The sentences code cells print, as the Chinese edition's catalogs hold and the generator writes them again."""
from __future__ import annotations

import contextlib
import io

import polib

from authoring.translation.printed import fields, printed_strings, skeleton, translation_problem, untranslatable, \
    with_printed

CELL = '''bumps, error, d = 2, 0.125, {"k": 7}
print(f"fused AdamW bumped the version {bumps} time(s), "
      "an {exact} count; "
      f"off by {error:.1%} and {d['k']}", "(a second argument stays)")
print("hello world")
print(f"{bumps}")
'''


def _output(source: str) -> str:
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        exec(compile(source, "<cell>", "exec"), {})
    return buffer.getvalue()


def test_literals_side_by_side_are_one_sentence_with_their_fields():
    found = printed_strings(CELL)
    assert [(one.english, one.is_f_string) for one in found] == [
        ("fused AdamW bumped the version {bumps} time(s), an {{exact}} count; off by {error:.1%} and {d['k']}", True),
        ("(a second argument stays)", False), ("hello world", False)]
    assert fields(found[0].english) == ["{bumps}", "{d['k']}", "{error:.1%}"], "{{exact}} is a brace, not a field"


def test_the_translation_prints_the_same_values_in_its_own_order():
    chinese = "差了 {error:.1%}，{d['k']}；融合的 AdamW 把版本推进了 {bumps} 次，{{exact}}"
    written = with_printed(CELL, list(zip(printed_strings(CELL), [chinese, None, "你好，世界"])))
    output = _output(written)
    assert "差了 12.5%，7；融合的 AdamW 把版本推进了 2 次，{exact} (a second argument stays)" in output
    second = with_printed(written, list(zip(printed_strings(written), [None, "（第二个参数）", None])))
    assert second.count("（第二个参数）") == 1
    assert "你好，世界" in output and "\n2\n" in output, "the sentence without words is not touched"
    assert skeleton(written) == skeleton(CELL), "only the words differ"
    assert skeleton(CELL) != skeleton(CELL.replace("{error:.1%}", "{error:.2%}")), "a changed field shows"


def test_a_translation_that_cannot_stand_in_the_code_is_a_problem():
    english = printed_strings(CELL)[0].english
    assert translation_problem(english, "少了一个字段 {bumps} {error:.1%}", True)
    assert translation_problem("hello world", '他说 "你好"', False)
    assert translation_problem("hello world", "两\n行", False)
    assert translation_problem("hello world", "你好，世界", False) is None


def test_forms_it_cannot_write_again_are_reported():
    assert untranslatable('print(r"raw \\\\d words here")\nprint("""three\nquotes words""")\n') and untranslatable(
        "print('a \"quoted\" word')\n")
    assert not untranslatable(CELL)


def test_a_sentence_added_before_others_keeps_their_translations():
    """A new print before the others renumbers the cell's entries: each old translation follows its English, and
    only the new sentence is left to translate (marked fuzzy with the Chinese of the one whose place it took)."""

    from authoring.translation.catalog import merged, new_catalog

    old = new_catalog()
    old.append(polib.POEntry(msgctxt="c1#print.0", msgid="first words", msgstr="第一句"))
    old.append(polib.POEntry(msgctxt="c1#print.1", msgid="second words", msgstr="第二句"))
    new = {entry.msgctxt: entry for entry in merged(old, {"c1#print.0": "a new sentence", "c1#print.1": "first words",
                                                          "c1#print.2": "second words"})}
    assert (new["c1#print.1"].msgstr, new["c1#print.1"].fuzzy) == ("第一句", False)
    assert (new["c1#print.2"].msgstr, new["c1#print.2"].fuzzy) == ("第二句", False)
    assert new["c1#print.0"].fuzzy and new["c1#print.0"].previous_msgid == "first words"
