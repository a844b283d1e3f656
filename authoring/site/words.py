"""The website's own words, in English: what no notebook, README or document says (the page note, the parts of
the table of contents, the map's header). The Chinese site takes them from ``i18n/zh_CN/site.po``, as it takes the
landing page's template (authoring/translation/site_words.py); a text with ``{fields}`` keeps them.
"""
from __future__ import annotations

COURSE_PART = "The course"
TEACHERS_PART = "For teachers"
PAGE_NOTE = ("*This page is the notebook solved, and run when the site was built.* To do its exercises yourself, "
             "{download}{launch}.")
DOWNLOAD = "download the student notebook"
LAUNCH = ", or open it on [Colab]({colab}) or [Binder]({binder})"
MAP_HEADER = "| notebook | what you learn | time |"
ENGLISH_ONLY = "*This page has not been translated yet: it is shown in English.*"  # only on a translated site
# A translated site's table of contents names the teachers' documents (the English one shows their titles), and
# says which are in English.
DOCUMENT_NAMES = {"workshop": "The workshop guide", "cheatsheet": "The cheat sheet", "hosting": "Hosting"}
IN_ENGLISH = "{name} (in English)"

WORDS = (COURSE_PART, TEACHERS_PART, PAGE_NOTE, DOWNLOAD, LAUNCH, MAP_HEADER, ENGLISH_ONLY, *DOCUMENT_NAMES.values(),
         IN_ENGLISH)
