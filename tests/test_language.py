"""The helpers speak the language COURSE_LANGUAGE names, through the compiled catalog; English otherwise."""
import polib
import pytest
import torch

from authoring.translation import messages as zh_messages
from helpers import exercises
from helpers.course.exercises.progress import make_summary
from helpers.course.exercises.result import not_attempted
from helpers.course.predict import Prediction
from helpers.language import LANGUAGE_VARIABLE, _catalog, chosen_language, tr, translated
from helpers.tools.expect import expect_error
from tests.paths import ROOT

CATALOG = {entry.msgid: entry.msgstr for entry in polib.pofile(str(zh_messages.catalog_file(ROOT)))
           if entry.translated()}


@pytest.fixture
def chinese(monkeypatch):
    monkeypatch.setenv(LANGUAGE_VARIABLE, "zh_CN")


@pytest.mark.parametrize("value", ["", "en", "en_US", "en-GB"])
def test_english_when_nothing_or_english_is_chosen(monkeypatch, value):
    monkeypatch.setenv(LANGUAGE_VARIABLE, value)
    assert chosen_language() == "" and tr("Correct") == "Correct"
    assert tr("Hints for {exercise}", exercise="two_grads") == "Hints for two_grads"


@pytest.mark.parametrize("value", ["zh_CN", "zh-CN", "zh", " zh_cn "])
def test_the_chinese_catalog_answers_every_spelling_of_chinese(monkeypatch, value):
    monkeypatch.setenv(LANGUAGE_VARIABLE, value)
    assert chosen_language() == "zh_CN"
    assert tr("Correct") == CATALOG["Correct"] != "Correct"
    assert tr("Hints for {exercise}", exercise="two_grads") == CATALOG["Hints for {exercise}"].format(
        exercise="two_grads")


def test_every_translated_message_comes_back_from_the_compiled_catalog(chinese):
    """The .mo the package ships holds exactly the PO file's current translations."""
    assert CATALOG
    for english, chinese_text in CATALOG.items():
        assert translated(english) == chinese_text


def test_a_message_without_a_translation_stays_english_and_an_unknown_language_warns_once(monkeypatch, chinese):
    assert tr("A sentence no catalog holds.") == "A sentence no catalog holds."
    monkeypatch.setenv(LANGUAGE_VARIABLE, "xx_YY")
    _catalog.cache_clear()
    with pytest.warns(UserWarning, match="no catalog for it"):
        assert tr("Correct") == "Correct"
    assert tr("Not yet") == "Not yet"  # English, and no second warning (pytest would fail on an unexpected one)


def test_the_language_is_read_when_a_message_is_made_not_at_import(monkeypatch):
    monkeypatch.delenv(LANGUAGE_VARIABLE, raising=False)
    assert str(not_attempted("two_grads")).startswith("Not attempted yet - exercise two_grads")
    monkeypatch.setenv(LANGUAGE_VARIABLE, "zh_CN")
    card = not_attempted("two_grads")
    assert str(card).startswith(CATALOG["{status} - exercise {exercise}"].format(
        status=CATALOG["Not attempted yet"], exercise="two_grads"))
    assert 'exercises.hint("two_grads")' in card.message and "NotImplementedError" in card.message


def test_a_chinese_summary_points_at_the_chinese_copies(chinese):
    text = str(make_summary("00_start_here", {}))
    assert CATALOG["its check cell has not run"] in text and "notebooks/zh-CN/01_graph_and_saved_tensors.ipynb" in text


def test_a_chinese_prediction_card_keeps_the_notebooks_own_strings(chinese):
    card = Prediction("问题？", ["甲", "乙"], "乙", "因为。")
    assert CATALOG["Right!"] in card.feedback("乙") and CATALOG["Not this time."] in card.feedback("甲")
    assert CATALOG["Predict what happens"] in card._repr_html_() and "因为。" in str(card)


def test_a_chinese_expected_error_card_keeps_pytorchs_message(chinese):
    weight = torch.ones(2, requires_grad=True)
    loss = (weight * weight).sum()
    loss.backward()
    with expect_error("backward-twice", show=False) as caught:
        loss.backward()
    text = str(caught.report)
    assert text.startswith(CATALOG["Expected error reproduced - {name}"].format(
        name=CATALOG["Error 1: backward through the graph a second time"]))
    assert "Trying to backward through the graph a second time" in text  # PyTorch's words, untranslated
    assert CATALOG["A backward pass frees the tensors the graph saved, unless you pass retain_graph=True.\n"
                   "A second backward through the same part of the graph then finds them gone."] in text


def test_a_chinese_check_result_from_a_real_checker(chinese):
    result = exercises.evaluate("head_weight_grad", lambda model, x, target: 1 / 0)
    assert not result.passed and str(result).startswith(CATALOG["Not yet"])
