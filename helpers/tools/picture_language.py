"""The language a graph picture draws its words in: the learner's where graphviz can lay it out here, else English,
with one printed line saying why (never boxes for missing characters, nor boxes too narrow for their words).

graphviz measures text, and draws a PNG, with pango when it has pango's plugin; on Linux pango finds fonts through
fontconfig and takes each character from the first font that has it. So fontconfig (``fc-list``) is asked for a
font with every Chinese character of the helpers' catalog, not matplotlib's font list (a font matplotlib loaded from
a file fontconfig does not know would be boxes here). Without ``fc-list``, or when it does not answer, or with a
graphviz that lays text out without pango (gd's plugin draws Chinese as boxes), the tools cannot tell, and the words
stay English. In Jupyter the browser draws the SVG's text with its own fonts: what is asked here is whether graphviz
can lay the words out. (On macOS and Windows pango may use the system's font service instead of fontconfig: not
checked.)
"""
from __future__ import annotations

import functools
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from helpers.language import chosen_language, marked, translated, translations

NO_FONT = marked("graphviz finds no font that draws this language here: the picture's words stay English. Install "
                 "one (for example fonts-noto-cjk) and run this cell again.")
CANNOT_TELL = marked("Cannot tell whether graphviz can draw this language here ({reason}): the picture's words stay "
                     "English.")
NO_FC_LIST = marked("fontconfig's fc-list is missing")
NO_ANSWER = marked("fontconfig's fc-list did not answer")
NO_PANGO = marked("this graphviz lays text out without pango")
NO_PLUGIN_LIST = marked("graphviz's list of plugins could not be read")
CHINESE = re.compile(r"[\u3000-\u303f\u3400-\u9fff\uf900-\ufaff\uff00-\uffef]")  # Han, CJK and full-width punctuation


@dataclass(frozen=True)
class PictureWords:
    """``translate``: the picture draws the chosen language; ``note``: why it does not, where it was asked to."""

    translate: bool
    note: Optional[str] = None


def picture_words(announce: bool = True) -> PictureWords:
    """Whether a picture drawn now draws the chosen language (fonts are asked about each time: one installed since
    is found). ``announce``: print the note, where there is one. Never raises: what it cannot ask, it cannot tell."""
    try:
        words = _picture_words()
    except Exception as error:  # a drawing must never stop a lesson
        words = PictureWords(False, translated(CANNOT_TELL, reason=f"{type(error).__name__}: {error}"))
    if announce and words.note is not None:
        print(words.note)
    return words


def _picture_words() -> PictureWords:
    language = chosen_language()
    if not language.startswith("zh"):  # English, or a language the helpers have no catalog for
        return PictureWords(False)
    dot = shutil.which("dot")
    if dot is None:  # nothing is drawn: the text form is shown, in the chosen language
        return PictureWords(False)
    pango = lays_out_with_pango(dot)
    if not pango:
        reason = NO_PLUGIN_LIST if pango is None else NO_PANGO
        return PictureWords(False, translated(CANNOT_TELL, reason=translated(reason)))
    found = fontconfig_draws(catalog_characters(language))
    if found is None:
        reason = NO_FC_LIST if shutil.which("fc-list") is None else NO_ANSWER
        return PictureWords(False, translated(CANNOT_TELL, reason=translated(reason)))
    return PictureWords(True) if found else PictureWords(False, translated(NO_FONT))


@functools.lru_cache(maxsize=None)
def catalog_characters(language: str) -> str:
    """The Chinese characters of every translation in the helpers' catalog for ``language`` (those a picture draws
    are among them)."""
    return "".join(sorted({character for text in translations(language) for character in CHINESE.findall(text)}))


def fontconfig_draws(text: str) -> Optional[bool]:
    """Whether fontconfig knows one font with a glyph for every character of ``text``; None when it cannot be asked
    (no ``fc-list``, or no answer)."""
    fc_list = shutil.which("fc-list")
    if fc_list is None:
        return None
    charset = " ".join(sorted({f"{ord(character):x}" for character in text if not character.isspace()}))
    try:  # the answer (font names, in any encoding) is read as bytes: only whether there is one matters
        found = subprocess.run([fc_list, f":charset={charset}", "file"], capture_output=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return bool(found.stdout.strip())


@functools.lru_cache(maxsize=None)
def lays_out_with_pango(dot: str) -> Optional[bool]:
    """Whether this ``dot`` lays text out with pango: its plugin configuration (the file ``dot -v`` names) lists
    pango's library as a ``textlayout`` plugin; None when that file cannot be found or read. Asked once per program."""
    try:
        said = subprocess.run([dot, "-v"], input=b"", capture_output=True, timeout=10).stderr.decode("utf-8", "replace")
    except (OSError, subprocess.SubprocessError):
        return None
    lines = said.splitlines()
    named = [lines[index + 1].strip() for index, line in enumerate(lines[:-1])
             if line.strip().startswith("The plugin configuration file")]
    try:
        configuration = Path(named[0]).read_text(encoding="utf-8", errors="replace")
    except (IndexError, OSError):
        return None
    library = ""
    for line in configuration.splitlines():
        if line and not line[0].isspace() and line.rstrip().endswith("{"):
            library = line.split()[0]
        elif line.strip().startswith("textlayout") and "pango" in Path(library).name:
            return True
    return False
