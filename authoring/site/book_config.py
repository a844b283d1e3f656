"""The book's ``_config.yml``: ``book/_config.yml``, plus the launch buttons of the release in ``release.json``.

Jupyter Book's Colab and Binder buttons open ``repository.branch`` at the page's own path. The staged pages are
``notebooks/NN_topic.ipynb``, the student copies' path in the repository, so the buttons open the student copy at
the pinned release. Before a release there is no repository: no button, and no link to one.
"""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Dict

from authoring.release_json import BINDER_SITE, COLAB_SITE, Release


def book_config(base: Dict[str, Any], release: Release, execution_cache: Path) -> Dict[str, Any]:
    """``base`` with the execution cache's folder and, once released, the repository and its launch buttons."""
    config = copy.deepcopy(base)
    config.setdefault("execute", {})["cache"] = str(execution_cache)
    html = config.setdefault("html", {})
    if release.is_set:
        config["repository"] = {"url": release.repository, "branch": release.ref, "path_to_book": ""}
        config["launch_buttons"] = {"colab_url": COLAB_SITE, "binderhub_url": BINDER_SITE,
                                    "notebook_interface": "jupyterlab"}
        html["use_repository_button"] = True
    else:
        config.pop("repository", None)
        config.pop("launch_buttons", None)
        html["use_repository_button"] = False
    return config
