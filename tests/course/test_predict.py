"""Predict-what-happens questions: the answer shown is what the run did, and a disagreement fails."""
import pytest
import torch

from helpers.course.predict import Prediction, observe, predict, predict_widget


def test_observe_reports_values_course_errors_and_other_errors():
    assert observe(lambda: 3) == 3
    assert observe(lambda: 1 / 0).startswith("ZeroDivisionError")
    weight = torch.ones(2, requires_grad=True)
    loss = (weight * weight).sum()
    loss.backward()
    assert observe(loss.backward) == "backward-twice"


def test_predict_fails_when_the_run_disagrees_with_the_lesson():
    with pytest.raises(AssertionError, match="this run gave 2"):
        predict("1 + 1?", {"two": 2, "three": 3}, run=lambda: 2, expected=3, explanation="")
    with pytest.raises(AssertionError, match="Exactly one choice"):
        predict("1 + 1?", {"two": 2, "also two": 2}, run=lambda: 2, expected=2, explanation="")


def test_predict_outside_jupyter_is_text_with_the_answer():
    result = predict("1 + 1?", {"two": 2, "three": 3}, run=lambda: 2, expected=2, explanation="Arithmetic.")
    assert isinstance(result, Prediction) and result.answer == "two" and "This run: two" in str(result)


def test_predict_widget_reveals_feedback_for_the_clicked_choice():
    prediction = Prediction("1 + 1?", ["two", "three"], "two", "Arithmetic.")
    widget = predict_widget(prediction)
    question, buttons, feedback = widget.children
    assert feedback.value == ""
    buttons.children[1].click()
    assert "Not this time." in feedback.value and "three" in feedback.value
    buttons.children[0].click()
    assert "Right!" in feedback.value and "Arithmetic." in feedback.value


def test_on_the_website_predict_is_the_static_card_even_in_a_kernel(monkeypatch):
    """bash book/build sets COURSE_STATIC_SITE=1 for its kernels: the card, with the answer folded, not buttons."""
    from helpers.course import static_site

    monkeypatch.setattr(static_site, "in_notebook", lambda: True)
    monkeypatch.setenv(static_site.STATIC_SITE_VARIABLE, "1")
    result = predict("1 + 1?", {"two": 2, "three": 3}, run=lambda: 2, expected=2, explanation="Arithmetic.")
    assert isinstance(result, Prediction)
    card = result._repr_html_()
    assert "<details><summary>Answer</summary>" in card and "Right!" in card
    monkeypatch.setenv(static_site.STATIC_SITE_VARIABLE, "0")
    assert not isinstance(predict("1 + 1?", {"two": 2}, run=lambda: 2, expected=2, explanation=""), Prediction)
