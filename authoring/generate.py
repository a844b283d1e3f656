"""Generate the student notebooks from solutions/ (the one source).

Usage, from the repository root::

    python -m authoring.generate           # write notebooks/*.ipynb and helpers/course/exercises/solutions.json
    python -m authoring.generate --check   # fail when any of them is stale (the tests run this)
    python -m authoring.generate --force   # overwrite student copies a learner edited (a .bak copy is kept)
    python -m authoring.generate --update-catalogs [STEM ...]   # keep i18n/zh_CN/*.po in step with the English
                                                                # (and start a catalog for each STEM named)

The Chinese edition (``authoring.translation``): for each solution notebook with a catalog in ``i18n/zh_CN/``, the
generator writes ``solutions/zh-CN/`` and ``notebooks/zh-CN/``; from ``i18n/zh_CN/helpers.po`` the compiled catalog of
what the helpers say (``helpers/locale/``); from ``i18n/zh_CN/cheatsheet.po`` the Chinese cheat sheet
(``docs/cheatsheet.zh-CN.md``). ``i18n/zh_CN/site.po`` holds the Chinese website's own words (``bash book/build``
reads it). ``--check`` fails on a missing, empty, stale or obsolete catalog entry too.
"""
from __future__ import annotations

import argparse
import copy
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple, Union

import nbformat

from authoring import release_json
from authoring.launch_cells import badges_markdown, readme_with_badges, with_badges, with_launch_cells
from authoring.solution_markers import MarkerError, has_marker_text, split_cell
from authoring.translation import catalog as zh_catalog
from authoring.translation import messages as zh_messages
from authoring.translation import printed as zh_printed
from authoring.translation import figure_words as zh_figures
from authoring.translation import sheet as zh_sheet
from authoring.translation import site_words as zh_site
from authoring.translation.edition import FOLDER as ZH_FOLDER
from authoring.translation.edition import TranslationError, markdown_english, setup_title, translated, \
    with_chinese_launch_cells

PACKAGE_DIR = Path(__file__).resolve().parent
SOLUTIONS_JSON = Path("helpers") / "course" / "exercises" / "solutions.json"
CATALOGS = zh_catalog.CATALOGS  # one <stem>.po per translated notebook, shared.po, and the catalogs below
ZH_README = "README.zh-CN.md"
SHARED_CATALOG = "shared"
# catalogs in i18n/zh_CN/ that are no notebook's
NOT_NOTEBOOKS = (SHARED_CATALOG, "helpers", "cheatsheet", "figures", "site")
KERNELSPEC = {"display_name": "Python 3", "language": "python", "name": "python3"}
GENERATED_NOTE = (
    "Generated from solutions/ by `python -m authoring.generate`: edit the solution notebook, not this copy."
)


def source_hash(notebook: nbformat.NotebookNode) -> str:
    """A fingerprint of a notebook's cell types and sources (outputs do not count)."""
    cells = [[cell.cell_type, cell.source] for cell in notebook.cells]
    return hashlib.sha256(json.dumps(cells).encode("utf-8")).hexdigest()


def kept_metadata(metadata: dict) -> dict:
    """What a student copy keeps of a cell's metadata: its tags, and how it is folded (Colab) or collapsed (Lab)."""
    kept: dict = {}
    if metadata.get("tags"):
        kept["tags"] = list(metadata["tags"])
    if "cellView" in metadata:
        kept["cellView"] = metadata["cellView"]
    hidden = {key: value for key, value in metadata.get("jupyter", {}).items() if key == "source_hidden"}
    if hidden:
        kept["jupyter"] = hidden
    return kept


def _clean_cell(cell: nbformat.NotebookNode) -> nbformat.NotebookNode:
    cell = copy.deepcopy(cell)
    cell["metadata"] = nbformat.NotebookNode(kept_metadata(cell.get("metadata", {})))
    if cell.cell_type == "code":
        cell["outputs"] = []
        cell["execution_count"] = None
    return cell


def make_student_notebook(
    solution: nbformat.NotebookNode, solution_path: str, solutions_out: Dict[str, dict]
) -> nbformat.NotebookNode:
    """The student copy of ``solution``: stubs for answers, no outputs, clean metadata.

    Each exercise's notebook, position in it (1 for its first exercise) and solution source are added to
    ``solutions_out``.

    Raises:
        MarkerError: malformed markers, markers in markdown, or an exercise solved in two cells.
    """
    cells = []
    position = 0
    for index, cell in enumerate(solution.cells, 1):
        where = f"{solution_path}, cell {index}"
        student_cell = _clean_cell(cell)
        if cell.cell_type == "code":
            split = split_cell(cell.source, where)
            student_cell["source"] = split.student_source
            if split.exercise_id is not None:
                if split.exercise_id in solutions_out:
                    raise MarkerError(where, 1, f"exercise {split.exercise_id!r} already has a solution cell")
                position += 1
                solutions_out[split.exercise_id] = {
                    "notebook": Path(solution_path).stem,
                    "position": position,
                    "source": split.solution_source,
                }
        elif has_marker_text(cell.source):
            raise MarkerError(where, 1, "solution markers are allowed in code cells only")
        cells.append(student_cell)
    notebook = nbformat.v4.new_notebook()
    notebook.cells = cells
    notebook.metadata = nbformat.NotebookNode(
        {
            "kernelspec": solution.metadata.get("kernelspec", KERNELSPEC),
            "language_info": {"name": "python"},
        }
    )
    notebook.metadata["course"] = {
        "generated_from": solution_path,
        "note": GENERATED_NOTE,
        "source_hash": source_hash(notebook),
    }
    return notebook


def _notebook_text(notebook: nbformat.NotebookNode) -> str:
    nbformat.validate(notebook)
    return nbformat.writes(notebook, version=4) + "\n"


def _student_with_launch_cells(
    student: nbformat.NotebookNode, release: release_json.Release, student_path: str
) -> nbformat.NotebookNode:
    student = with_launch_cells(student, release, student_path)
    student.metadata["course"]["source_hash"] = source_hash(student)
    return student


def _readme(root: Path, release: release_json.Release, stems: List[str]) -> Optional[str]:
    readme_path = root / "README.md"
    if not readme_path.exists():
        return None
    readme = readme_with_badges(readme_path.read_text(encoding="utf-8"), release, "notebooks", stems)
    return with_badges(readme, badges_markdown(release, "notebooks/00_start_here.ipynb"))


def _chinese_readme(root: Path, release: release_json.Release, stems: List[str]) -> Optional[str]:
    """README.zh-CN.md with its table's "open" column and the badges under its title, Kaggle's included."""
    readme_path = root / ZH_README
    if not readme_path.exists():
        return None
    folder = f"notebooks/{ZH_FOLDER}"
    readme = readme_with_badges(readme_path.read_text(encoding="utf-8"), release, folder, stems, kaggle=True,
                                before_release="首次发布之后")
    return with_badges(readme, badges_markdown(release, f"{folder}/00_start_here.ipynb", kaggle=True))


def build(root: Path) -> Dict[Path, Union[str, bytes]]:
    """Every generated file under ``root``, as path -> text.

    That is the student copies, the exercises' solutions file, and the parts generated from release.json:
    the badges and Colab set-up cell in each solution notebook, and the README's badges.
    """
    outputs: Dict[Path, Union[str, bytes]] = {}
    solutions: Dict[str, dict] = {}
    release = release_json.load(root)
    solution_files = sorted((root / "solutions").glob("*.ipynb"))
    for solution_file in solution_files:
        relative = solution_file.relative_to(root).as_posix()
        solution = nbformat.read(str(solution_file), as_version=4)
        solution = with_launch_cells(solution, release, relative)
        outputs[solution_file] = _notebook_text(solution)
        student = make_student_notebook(solution, relative, solutions)
        student_path = f"notebooks/{solution_file.name}"
        outputs[root / student_path] = _notebook_text(_student_with_launch_cells(student, release, student_path))
    outputs[root / SOLUTIONS_JSON] = json.dumps(solutions, indent=1, sort_keys=True) + "\n"
    outputs.update(chinese_outputs(root, release, solution_files))
    outputs.update(zh_messages.compiled_output(root))
    chinese_sheet = zh_sheet.chinese_sheet(root)
    if chinese_sheet is not None:
        outputs[root / zh_sheet.CHINESE] = chinese_sheet
    readme = _readme(root, release, [path.stem for path in solution_files])
    if readme is not None:
        outputs[root / "README.md"] = readme
    chinese_readme = _chinese_readme(root, release, sorted(set(translated_stems(root)) & {
        path.stem for path in solution_files}))
    if chinese_readme is not None:
        outputs[root / ZH_README] = chinese_readme
    return outputs


def catalog_path(root: Path, stem: str) -> Path:
    """The Chinese catalog of notebook ``stem`` (``shared`` for the texts every notebook has)."""
    return root / CATALOGS / f"{stem}.po"


def translated_stems(root: Path) -> List[str]:
    """The notebooks that have a Chinese catalog, and so a Chinese edition."""
    return sorted(path.stem for path in (root / CATALOGS).glob("*.po") if path.stem not in NOT_NOTEBOOKS)


def _shared_catalog(root: Path) -> zh_catalog.Catalog:
    path = catalog_path(root, SHARED_CATALOG)
    return zh_catalog.load(path) if path.exists() else zh_catalog.new_catalog()


def english_entries(notebook: nbformat.NotebookNode) -> zh_catalog.Entries:
    """What a notebook's catalog translates: its markdown cells without badges, its check titles, its cards'
    strings."""
    markdown = {cell.id: markdown_english(cell) for cell in notebook.cells if cell.cell_type == "markdown"}
    return zh_catalog.notebook_entries(notebook, markdown)


def chinese_outputs(root: Path, release: release_json.Release, solution_files: Sequence[Path]) -> Dict[Path, str]:
    """The Chinese solution notebook and student copy of each notebook that has a catalog.

    Raises:
        TranslationError: a check cell whose title and printed line do not match.
    """
    outputs: Dict[Path, str] = {}
    stems = set(translated_stems(root))
    shared = _shared_catalog(root)
    for solution_file in solution_files:
        if solution_file.stem not in stems:
            continue
        source_path = solution_file.relative_to(root).as_posix()
        english = nbformat.read(str(solution_file), as_version=4)
        solution_path = f"solutions/{ZH_FOLDER}/{solution_file.name}"
        solution = translated(english, zh_catalog.load(catalog_path(root, solution_file.stem)), shared, release,
                              solution_path, source_path)
        outputs[root / solution_path] = _notebook_text(solution)
        student_path = f"notebooks/{ZH_FOLDER}/{solution_file.name}"
        student = make_student_notebook(solution, solution_path, {})
        student = with_chinese_launch_cells(student, release, student_path, shared)
        student.metadata["course"]["source_hash"] = source_hash(student)
        outputs[root / student_path] = _notebook_text(student)
    return outputs


def _english_notebooks(root: Path, stems: Sequence[str]) -> Tuple[Dict[str, nbformat.NotebookNode], List[str]]:
    """The English solution notebook of each of ``stems``, and the stems that have none (renamed or deleted)."""
    found = {stem: nbformat.read(str(root / "solutions" / f"{stem}.ipynb"), as_version=4) for stem in stems
             if (root / "solutions" / f"{stem}.ipynb").exists()}
    return found, [stem for stem in stems if stem not in found]


def _shared_entries(notebooks: Dict[str, nbformat.NotebookNode]) -> zh_catalog.Entries:
    """The shared catalog's entries, as the English notebooks have them (the set-up cell's title)."""
    entries: zh_catalog.Entries = {}
    for english in notebooks.values():
        entries.update(setup_title(english))
    return entries


def catalog_problems(root: Path) -> List[str]:
    """Each missing, empty, stale or obsolete entry of the Chinese catalogs."""
    stems = translated_stems(root)
    notebooks, gone = _english_notebooks(root, stems)
    found = [f"{catalog_path(root, stem).relative_to(root).as_posix()} has no solution notebook" for stem in gone]
    for stem, english in notebooks.items():
        name = catalog_path(root, stem).relative_to(root).as_posix()
        catalog = zh_catalog.load(catalog_path(root, stem))
        found += zh_catalog.problems(catalog, english_entries(english), name)
        found += [f"solutions/{stem}.ipynb, cell {cell.id}: {problem} (the Chinese edition cannot translate it)"
                  for cell in english.cells if cell.cell_type == "code"
                  for problem in zh_catalog.untranslatable(cell.source) + zh_printed.untranslatable(cell.source)]
        found += _printed_problems(catalog, english, name)
    if stems:
        shared_name = catalog_path(root, SHARED_CATALOG).relative_to(root).as_posix()
        found += zh_catalog.problems(_shared_catalog(root), _shared_entries(notebooks), shared_name)
    return (found + zh_messages.catalog_problems(root) + zh_sheet.catalog_problems(root)
            + zh_figures.catalog_problems(root) + zh_site.catalog_problems(root))


def _printed_problems(catalog: zh_catalog.Catalog, english: nbformat.NotebookNode, name: str) -> List[str]:
    """Each current translation of a printed sentence that cannot stand in the code (other fields, a line break)."""
    entries = zh_catalog.by_context(catalog)
    found = []
    for cell in english.cells:
        if cell.cell_type != "code" or zh_catalog.title_text(cell) is not None:
            continue
        for key, one in zh_printed.printed_entries(cell.id, cell.source):
            entry = entries.get(key)
            if zh_catalog.current(entry, one.english):
                problem = zh_printed.translation_problem(one.english, entry.msgstr, one.is_f_string)
                if problem:
                    found.append(f"{name}: entry {key}: {problem}")
    return found


def update_catalogs(root: Path, new_stems: Sequence[str]) -> List[Path]:
    """Bring every Chinese catalog (and a new one for each of ``new_stems``) in step with the English; returns the
    files written."""
    written: List[Path] = []
    notebooks, gone = _english_notebooks(root, sorted(set(translated_stems(root)) | set(new_stems)))
    for stem in gone:
        print(f"skipped {stem}: there is no solutions/{stem}.ipynb (renamed? its catalog is "
              f"{catalog_path(root, stem).relative_to(root)})", file=sys.stderr)
    for stem, english in notebooks.items():
        path = catalog_path(root, stem)
        old = zh_catalog.load(path) if path.exists() else zh_catalog.new_catalog()
        written += _write_if_changed(path, zh_catalog.po_text(zh_catalog.merged(old, english_entries(english))))
    shared_entries = _shared_entries(notebooks)
    if shared_entries:
        text = zh_catalog.po_text(zh_catalog.merged(_shared_catalog(root), shared_entries))
        written += _write_if_changed(catalog_path(root, SHARED_CATALOG), text)
    for path, text in ((zh_messages.catalog_file(root), zh_messages.updated_text(root)),
                       (root / zh_sheet.CATALOG, zh_sheet.updated_text(root)),
                       (root / zh_figures.CATALOG, zh_figures.updated_text(root)),
                       (root / zh_site.CATALOG, zh_site.updated_text(root))):
        if text is not None:
            written += _write_if_changed(path, text)
    return written


def _write_if_changed(path: Path, text: str) -> List[Path]:
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return []
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return [path]


def _read(path: Path, like: Union[str, bytes]) -> Union[str, bytes]:
    """A generated file's content, as bytes or text like what the generator writes there."""
    return path.read_bytes() if isinstance(like, bytes) else path.read_text(encoding="utf-8")


def learner_edited(path: Path) -> bool:
    """True when a student copy's cells differ from what the generator last wrote there."""
    try:
        notebook = nbformat.read(str(path), as_version=4)
    except Exception:
        return True  # unreadable: treat as someone's work, never overwrite silently
    recorded = notebook.metadata.get("course", {}).get("source_hash")
    return recorded != source_hash(notebook)


def orphans(root: Path) -> List[Path]:
    """Student notebooks whose solution no longer exists, and Chinese notebooks that have no catalog."""
    solution_names = {path.name for path in (root / "solutions").glob("*.ipynb")}
    found = [path for path in sorted((root / "notebooks").glob("*.ipynb")) if path.name not in solution_names]
    translated_names = {f"{stem}.ipynb" for stem in translated_stems(root)} & solution_names
    for folder in (root / "solutions" / ZH_FOLDER, root / "notebooks" / ZH_FOLDER):
        found += [path for path in sorted(folder.glob("*.ipynb")) if path.name not in translated_names]
    return found


def check(root: Path) -> List[str]:
    """Problems that make the generated files stale; empty when all is up to date."""
    problems = []
    for path, text in build(root).items():
        if not path.exists():
            problems.append(f"{path.relative_to(root)} is missing")
        elif _read(path, text) != text:
            problems.append(f"{path.relative_to(root)} is stale")
    problems += [f"{path.relative_to(root)} has no solution notebook" + (" or no catalog" if ZH_FOLDER in path.parts
                                                                          else "") for path in orphans(root)]
    return problems + catalog_problems(root)


def write(root: Path, force: bool) -> List[str]:
    """Write every generated file; returns the student copies refused because a learner edited them."""
    outputs = build(root)
    refused = [
        path
        for path in outputs
        if path.parent in (root / "notebooks", root / "notebooks" / ZH_FOLDER) and path.exists()
        and learner_edited(path)
        and path.read_text(encoding="utf-8") != outputs[path]
    ]
    if refused and not force:
        return [str(path.relative_to(root)) for path in refused]
    for path in refused:
        backup = path.with_name(f"{path.name}.{time.strftime('%Y%m%d-%H%M%S')}.bak")
        backup.write_bytes(path.read_bytes())
        print(f"kept your edited copy as {backup.relative_to(root)}")
    for path, text in outputs.items():
        if path.exists() and _read(path, text) == text:
            continue  # unchanged: keep its timestamp
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text, encoding="utf-8")
    return []


def is_solution_notebook(path: Path, root: Optional[Path] = None) -> bool:
    """True for a notebook under solutions/: its checks run strict (COURSE_STRICT=1) in tests and benchmarks."""
    return Path(path).resolve().is_relative_to((root or default_root()).resolve() / "solutions")


def default_root() -> Path:
    """The repository root: the folder above ``authoring/`` when it holds solutions/, else the cwd."""
    candidate = PACKAGE_DIR.parent
    return candidate if (candidate / "solutions").is_dir() else Path.cwd()


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The command line; returns the exit code (0 ok, 1 stale or refused, 2 bad markers)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="fail when generated files are stale")
    parser.add_argument("--force", action="store_true", help="overwrite edited student copies (keeps a .bak)")
    parser.add_argument("--update-catalogs", nargs="*", metavar="STEM", default=None,
                        help="update the Chinese catalogs from the English (and start one for each STEM named)")
    parser.add_argument("--root", type=Path, default=None, help="repository root (default: found automatically)")
    args = parser.parse_args(argv)
    root = (args.root or default_root()).resolve()
    try:
        if args.update_catalogs is not None:
            for path in update_catalogs(root, args.update_catalogs):
                print(f"updated {path.relative_to(root)}")
            return 0
        if args.check:
            problems = check(root)
            for problem in problems:
                print(f"stale: {problem}", file=sys.stderr)
            if problems:
                print("Run `python -m authoring.generate` and commit the result.", file=sys.stderr)
                return 1
            print("notebooks/ is up to date with solutions/, and badges and set-up cells with release.json; "
                  f"the Chinese catalogs are complete (translated: {', '.join(translated_stems(root)) or 'none'})")
            return 0
        refused = write(root, args.force)
    except (MarkerError, release_json.ReleaseError, TranslationError, OSError) as error:  # OSError: polib's
        print(f"error: {error}", file=sys.stderr)
        return 2
    if refused:
        print("Not overwritten, because they were edited since they were generated:", file=sys.stderr)
        for path in refused:
            print(f"  {path}", file=sys.stderr)
        print("Save your work elsewhere, or rerun with --force (your copy is kept as a .bak file).", file=sys.stderr)
        return 1
    print("wrote notebooks/, helpers/course/exercises/solutions.json, "
          "and the launch cells and badges from release.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
