"""Where learners fetch the course from: the public repository and a pinned ref, kept in ``release.json``.

That file is the one place that names them. ``python -m authoring.generate`` generates the Colab and Binder badges,
and the Colab set-up cell at the top of every notebook, from it; ``python -m authoring.release`` fills it in.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional
from urllib.parse import quote

RELEASE_FILE = "release.json"
GITHUB_REPOSITORY = re.compile(r"^https://github\.com/(?P<owner>[A-Za-z0-9-]+)/(?P<name>[A-Za-z0-9._-]+?)(\.git)?$")
COMMIT_HASH = re.compile(r"^[0-9a-f]{40}$")
VERSION_TAG = re.compile(r"^v?\d+(\.\d+)*([.-]?[A-Za-z0-9]+)*$")
COLAB_SITE = "https://colab.research.google.com"
BINDER_SITE = "https://mybinder.org"
KAGGLE_SITE = "https://kaggle.com"
BRANCH_NAMES = {"main", "master", "develop", "dev", "head", "trunk", "gh-pages"}


class ReleaseError(ValueError):
    """release.json names no usable repository or ref."""


@dataclass(frozen=True)
class Release:
    """The course's public GitHub repository and the pinned ref notebooks fetch; both None before a release."""

    repository: Optional[str] = None
    ref: Optional[str] = None

    @property
    def is_set(self) -> bool:
        """True once a release step filled in both fields."""
        return bool(self.repository and self.ref)

    @property
    def owner_and_name(self) -> str:
        """``OWNER/NAME`` of the repository."""
        match = GITHUB_REPOSITORY.match(self.repository or "")
        if not match:
            raise ReleaseError(f"not a GitHub repository address: {self.repository!r}")
        return f"{match['owner']}/{match['name']}"

    def colab_url(self, notebook_path: str) -> str:
        """The address that opens ``notebook_path`` (relative to the repository root) in Google Colab."""
        return f"{COLAB_SITE}/github/{self.owner_and_name}/blob/{self.ref}/{notebook_path}"

    def kaggle_url(self, notebook_path: str) -> str:
        """The address that imports ``notebook_path`` from GitHub into a new Kaggle notebook."""
        source = f"https://github.com/{self.owner_and_name}/blob/{self.ref}/{notebook_path}"
        return f"{KAGGLE_SITE}/kernels/welcome?src={source}"

    def binder_url(self, notebook_path: str) -> str:
        """The address that builds the course on Binder and opens ``notebook_path`` in JupyterLab."""
        where = quote("lab/tree/" + notebook_path, safe="")
        return f"{BINDER_SITE}/v2/gh/{self.owner_and_name}/{self.ref}?urlpath={where}"


def validate(release: Release) -> Release:
    """``release`` itself, or a ReleaseError saying what is wrong (an unset release is valid)."""
    if release.repository is None and release.ref is None:
        return release
    if not release.repository or not release.ref:
        raise ReleaseError("release.json sets only one of 'repository' and 'ref': set both, or neither")
    release.owner_and_name  # raises for a non-GitHub address
    if release.ref.lower() in BRANCH_NAMES or release.ref.lower().startswith(("refs/heads/", "origin/")):
        raise ReleaseError(f"ref {release.ref!r} is a branch: pin a tag (v1.0.0) or a full commit hash")
    if not (COMMIT_HASH.match(release.ref) or VERSION_TAG.match(release.ref)):
        raise ReleaseError(
            f"ref {release.ref!r} is neither a version tag (v1.0.0) nor a full 40-character commit hash"
        )
    return release


def load(root: Path) -> Release:
    """The release named in ``root/release.json`` (unset when the file is missing), validated."""
    path = Path(root) / RELEASE_FILE
    if not path.exists():
        return Release()
    data = json.loads(path.read_text(encoding="utf-8"))
    return validate(Release(repository=data.get("repository"), ref=data.get("ref")))


def save(root: Path, release: Release) -> Path:
    """Write ``release`` to ``root/release.json``; returns the path."""
    validate(release)
    path = Path(root) / RELEASE_FILE
    text = json.dumps({"repository": release.repository, "ref": release.ref}, indent=1) + "\n"
    path.write_text(text, encoding="utf-8")
    return path
