"""'Predict what happens' questions whose answer comes from running the code, not from the author."""
from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any, Callable, List, Mapping

from helpers.course.static_site import widgets_wanted
from helpers.language import tr
from helpers.tools.display import card_html
from helpers.tools.errors import classify


def observe(run: Callable[[], Any]) -> Any:
    """Run ``run``: its return value, or the course error kind it raised (``"backward-twice"``, ...).

    Any other exception is returned as ``"ExceptionName: message"``.
    """
    try:
        return run()
    except Exception as error:  # the outcome of the experiment, whatever it is
        kind = classify(error)
        return kind.name if kind else f"{type(error).__name__}: {error}"


@dataclass(frozen=True)
class Prediction:
    """A question, its choices, and what this run showed."""

    question: str
    choices: List[str]
    answer: str
    explanation: str

    def feedback(self, choice: str) -> str:
        """HTML feedback for a learner who chose ``choice``."""
        verdict = tr("Right!") if choice == self.answer else tr("Not this time.")
        chosen = tr("You chose {choice}; this run: {answer}.", choice=f"<i>{html.escape(choice)}</i>",
                    answer=f"<i>{html.escape(self.answer)}</i>")
        return f"<div><b>{html.escape(verdict)}</b> {chosen}<br>{html.escape(self.explanation)}</div>"

    def __str__(self) -> str:
        choices = "\n".join(f"  - {choice}" for choice in self.choices)
        return tr("Predict: {question}\n{choices}\nThis run: {answer}. {explanation}", question=self.question,
                  choices=choices, answer=self.answer, explanation=self.explanation)

    def _repr_html_(self) -> str:
        choices = "".join(f"<li>{html.escape(c)}</li>" for c in self.choices)
        body = (f"<div>{html.escape(self.question)}</div><ul>{choices}</ul>"
                f"<details><summary>{html.escape(tr('Answer'))}</summary>{self.feedback(self.answer)}</details>")
        return card_html(tr("Predict what happens"), body, accent="#8e44ad")


def predict_widget(prediction: Prediction) -> Any:
    """One button per choice; a click reveals what happened (ipywidgets 7 and 8)."""
    import ipywidgets

    question = ipywidgets.HTML(value=f"<b>{html.escape(tr('Predict:'))}</b> {html.escape(prediction.question)}")
    feedback = ipywidgets.HTML(value="")
    buttons = []
    for choice in prediction.choices:
        button = ipywidgets.Button(description=choice, layout=ipywidgets.Layout(width="auto"))

        def reveal(_button: Any, choice: str = choice) -> None:
            feedback.value = prediction.feedback(choice)

        button.on_click(reveal)
        buttons.append(button)
    return ipywidgets.VBox([question, ipywidgets.HBox(buttons), feedback])


def predict(
    question: str, choices: Mapping[str, Any], run: Callable[[], Any], expected: Any, explanation: str
) -> Any:
    """Ask the learner to predict, then reveal what ``run()`` really did.

    Args:
        question: what to predict.
        choices: button label -> the outcome it stands for (a return value, an error kind name, or None).
        run: a self-contained experiment; its outcome is what ``observe`` reports.
        expected: the outcome the lesson was written for.
        explanation: why, shown after a choice.

    Raises:
        AssertionError: when the run's outcome is not ``expected`` (so a test fails when PyTorch changes).
    """
    outcome = observe(run)
    if outcome != expected:
        raise AssertionError(f"The lesson expects {expected!r} for {question!r}, but this run gave {outcome!r}.")
    answers = [label for label, value in choices.items() if value == outcome]
    if len(answers) != 1:
        raise AssertionError(f"Exactly one choice must stand for the outcome {outcome!r}; found {answers}.")
    prediction = Prediction(question, list(choices), answers[0], explanation)
    if widgets_wanted():
        try:
            return predict_widget(prediction)
        except ImportError:
            pass
    return prediction
