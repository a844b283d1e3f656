"""The language a graph picture draws its words in: the learner's where graphviz can draw it here, else English, with
one printed line saying why (never boxes for missing characters).

graphviz lays text out with pango, which finds fonts through fontconfig and takes each character from the first font
that has it. So the question is asked of fontconfig (``fc-list``), not of matplotlib's font list (the plots'
``helpers.chinese_font``): a font matplotlib loaded from a file fontconfig does not know would be boxes here. Without
``fc-list``, or with a graphviz that lays text out without pango (it then guesses widths from Latin fonts' metrics),
the tools cannot tell, and the words stay English.
"""
from __future__ import annotations

import functools
import shutil
import subprocess
from dataclasses import dataclass
from typing import Optional

from helpers.chinese_font import SAMPLE
from helpers.language import chosen_language, marked, translated

NO_FONT = marked("graphviz finds no font that draws this language here: the picture's words stay English. Install "
                 "one (for example fonts-noto-cjk) and run this cell again.")
CANNOT_TELL = marked("Cannot tell whether graphviz can draw this language here ({reason}): the picture's words stay "
                     "English.")
NO_FC_LIST = marked("fontconfig's fc-list is missing")
NO_PANGO = marked("this graphviz lays text out without pango")


@dataclass(frozen=True)
class PictureWords:
    """``translate``: the picture draws the chosen language; ``note``: why it does not, where it was asked to."""

    translate: bool
    note: Optional[str] = None


def picture_words(announce: bool = True) -> PictureWords:
    """Whether a picture drawn now draws the chosen language (asked each time: a font installed since is found).
    ``announce``: print the note, where there is one."""
    words = _picture_words()
    if announce and words.note is not None:
        print(words.note)
    return words


def _picture_words() -> PictureWords:
    if not chosen_language().startswith("zh"):  # English, or a language the helpers have no catalog for
        return PictureWords(False)
    dot = shutil.which("dot")
    if dot is None:  # nothing is drawn: the text form is shown, in the chosen language
        return PictureWords(False)
    if not _lays_out_with_pango(dot):
        return PictureWords(False, translated(CANNOT_TELL, reason=translated(NO_PANGO)))
    found = fontconfig_draws(SAMPLE)
    if found is None:
        return PictureWords(False, translated(CANNOT_TELL, reason=translated(NO_FC_LIST)))
    return PictureWords(True) if found else PictureWords(False, translated(NO_FONT))


def fontconfig_draws(text: str) -> Optional[bool]:
    """Whether fontconfig knows a font with a glyph for every character of ``text``; None when it cannot be asked."""
    fc_list = shutil.which("fc-list")
    if fc_list is None:
        return None
    charset = " ".join(sorted({f"{ord(character):x}" for character in text if not character.isspace()}))
    try:
        found = subprocess.run([fc_list, f":charset={charset}", "family"], capture_output=True, text=True,
                               timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return bool(found.stdout.strip())


@functools.lru_cache(maxsize=None)
def _lays_out_with_pango(dot: str) -> bool:
    """Whether this ``dot`` has a text layout plugin (pango): ``dot -v`` lists its plugins. Asked once per program."""
    try:
        listed = subprocess.run([dot, "-v"], input="", capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return False
    return any(line.split(":")[0].strip() == "textlayout" and line.split(":", 1)[1].strip()
               for line in listed.stderr.splitlines() if ":" in line)
