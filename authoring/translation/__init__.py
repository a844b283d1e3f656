"""The Chinese edition: catalogs of translated cells (``i18n/zh_CN/``), and the notebooks written from them.

The English solution notebooks are the one source. Each translated notebook has a PO catalog beside the course
(``i18n/zh_CN/<stem>.po``): one entry per markdown cell and one per check cell's title, keyed by the cell's id
(``msgctxt``), with the English it translates (``msgid``). ``python -m authoring.generate`` writes the Chinese
solution notebooks (``solutions/zh-CN/``) and their student copies (``notebooks/zh-CN/``); every code cell is the
English one, with only its catalogued title and check line in Chinese.
"""
