"""The course as a website (Jupyter Book 1): ``bash book/build`` stages the pages here, then builds them.

``stage.py`` writes the book's source folder: ``pages.py`` says which pages, in course order,
``notebook_page.py`` turns a solved notebook into its page, ``landing.py`` writes the landing page from
``book/intro.md`` and the README, ``documents.py`` brings the teachers' documents, ``book_config.py`` adds the
launch buttons of the release in ``release.json`` to ``book/_config.yml``, and ``execution_cache.py`` names the
execution cache after what the outputs depend on.
"""
