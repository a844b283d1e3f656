"""The language the helpers speak to a learner: English, or the one ``COURSE_LANGUAGE`` names.

The Chinese notebooks' first code cell sets ``COURSE_LANGUAGE=zh_CN``; a learner can set it too, before or after
importing the helpers (it is read at each message). Messages are looked up with the standard library's ``gettext``
in ``helpers/locale/<language>/LC_MESSAGES/helpers.mo``, which ``python -m authoring.generate`` compiles from
``i18n/<language>/helpers.po``. A message without a current translation stays English, and so does everything when
the variable is unset, empty or ``en``. PyTorch's own messages are never translated.

Mark a learner-facing string with ``tr``; its English is the ``msgid``, so the call must take one string literal::

    tr("{model} got the gradient of {other}.", model=model, other=other)

A constant made at import (before a notebook may choose its language) is marked with ``marked`` and translated
where it is shown, with ``translated``.
"""
from __future__ import annotations

import functools
import gettext
import os
import warnings
from pathlib import Path
from typing import List

LANGUAGE_VARIABLE = "COURSE_LANGUAGE"
DOMAIN = "helpers"
LOCALE_DIR = Path(__file__).resolve().parent / "locale"
_ALIASES = {"zh": "zh_CN", "zh_hans": "zh_CN", "zh_cn": "zh_CN"}


def chosen_language() -> str:
    """The language asked for (``zh_CN``), normalised; ``""`` for English."""
    asked = os.environ.get(LANGUAGE_VARIABLE, "").strip().replace("-", "_")
    if not asked or asked.lower().split("_")[0] == "en":
        return ""
    return _ALIASES.get(asked.lower(), asked)


@functools.lru_cache(maxsize=None)
def _catalog(language: str) -> gettext.NullTranslations:
    """The compiled catalog of ``language``; English (with a warning, once) when the helpers have none."""
    try:
        return gettext.translation(DOMAIN, str(LOCALE_DIR), languages=[language])
    except OSError:
        have = sorted(path.name for path in LOCALE_DIR.glob("*") if path.is_dir())
        warnings.warn(f"{LANGUAGE_VARIABLE}={language!r}: the helpers have no catalog for it (they have: "
                      f"{', '.join(have) or 'none'}); they speak English.", stacklevel=3)
        return gettext.NullTranslations()


def translations(language: str) -> List[str]:
    """Every translation in the helpers' catalog for ``language`` (none where it has no catalog)."""
    messages = getattr(_catalog(language), "_catalog", {})  # where gettext.GNUTranslations keeps them
    return [text for key, text in messages.items() if key and isinstance(text, str)]  # key "": the catalog's header


def tr(message: str, /, **values: object) -> str:
    """``message`` in the chosen language, its ``{name}`` fields filled from ``values`` (no formatting without
    values, so a message without fields may hold braces)."""
    language = chosen_language()
    text = _catalog(language).gettext(message) if language else message
    return text.format(**values) if values else text


def space() -> str:
    """What goes between two sentences in the chosen language: a space in English, nothing in Chinese."""
    return "" if chosen_language().startswith("zh") else " "


def comma(translate: bool = True) -> str:
    """What goes between the items of a list of words: ", " in English, "，" in Chinese (``translate``: in the chosen
    language, else English)."""
    return "，" if translate and chosen_language().startswith("zh") else ", "


def marked(message: str) -> str:
    """``message`` unchanged: marks a constant for the catalog, to be shown with ``translated``."""
    return message


def translated(message: str, /, **values: object) -> str:
    """``tr`` for a message marked elsewhere (with ``marked`` or ``tr``): its argument need not be a literal."""
    return tr(message, **values)


def translated_if(translate: bool, message: str, /, **values: object) -> str:
    """``message`` (marked elsewhere) with its fields filled: ``translated`` when ``translate``, else in English (a
    picture where no font draws the chosen language; text that code reads)."""
    if translate:
        return translated(message, **values)
    return message.format(**values) if values else message
