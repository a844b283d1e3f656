"""The course's launch configuration: idle kernels shut down, running ones never, breaks survived, one source.

helpers/jupyter_config/jupyter_server_config.json is put on Jupyter's config path by ``python -m helpers.lab``
(local), binder/start (Binder, and hub images built from binder/), and the JupyterHub recipes in docs/hosting.md.
What the settings do to a real session is tested in tests/browser/test_solved_course.py.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

from authoring import sizing
from authoring.whole_session import course_notebooks
from helpers import lab
from tests.paths import ROOT

WORKSHOP = ROOT / "docs" / "workshop.md"
HOSTING = ROOT / "docs" / "hosting.md"


def loaded_culling_settings(command: List[str], environment: Dict[str, str]) -> Dict[str, str]:
    """The culling settings a ``jupyter server`` started through ``command`` reads, as ``--show-config`` prints them."""
    shown = subprocess.run([*command, sys.executable, "-m", "jupyter", "server", "--show-config"], env=environment,
                           capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert shown.returncode == 0, shown.stderr[-2000:]
    settings, section = {}, ""
    for line in shown.stdout.splitlines():
        if line and not line[0].isspace():
            section = line.strip()
        elif section == "MappingKernelManager" and line.strip().startswith(".cull_"):
            name, value = line.strip()[1:].split(" = ", 1)
            settings[name] = value
    return settings


def _isolated(tmp_path: Path) -> Dict[str, str]:
    """An environment whose user config folder is empty, so only the course's config can set culling."""
    environment = lab.launch_environment({key: value for key, value in os.environ.items()
                                          if key != lab.CONFIG_PATH_VARIABLE})
    environment["JUPYTER_CONFIG_DIR"] = str(tmp_path / "user-config")
    return environment


def _expected() -> Dict[str, str]:
    return {key: json.dumps(value).replace("true", "True").replace("false", "False")
            for key, value in lab.culling_settings().items()}


def test_the_launcher_puts_the_course_configuration_before_the_rest_of_the_config_path(tmp_path):
    environment = lab.launch_environment({lab.CONFIG_PATH_VARIABLE: "/elsewhere"})
    assert environment[lab.CONFIG_PATH_VARIABLE].split(os.pathsep) == [str(lab.config_dir()), "/elsewhere"]
    again = lab.launch_environment(environment)
    assert again[lab.CONFIG_PATH_VARIABLE] == environment[lab.CONFIG_PATH_VARIABLE], "added twice"


def test_the_server_started_by_the_launcher_loads_the_culling_settings(tmp_path):
    assert loaded_culling_settings([], _isolated(tmp_path)) == _expected()


def test_the_server_started_by_binder_start_loads_the_same_settings(tmp_path):
    environment = _isolated(tmp_path)
    environment.pop(lab.CONFIG_PATH_VARIABLE)
    assert loaded_culling_settings(["bash", str(ROOT / "binder" / "start")], environment) == _expected()


def test_without_the_launch_configuration_nothing_is_culled(tmp_path):
    """The check above can fail: a plain server has culling off."""
    environment = _isolated(tmp_path)
    environment.pop(lab.CONFIG_PATH_VARIABLE)
    assert loaded_culling_settings([], environment) == {}


def test_culling_never_touches_a_running_kernel_and_reaches_open_tabs():
    settings = lab.culling_settings()
    assert settings["cull_busy"] is False, "a kernel running a cell must never be culled"
    assert settings["cull_connected"] is True, "a notebook left open in a tab keeps a connection: cull it too"
    assert 0 < settings["cull_interval"] <= settings["cull_idle_timeout"] / 10


def planned_breaks_minutes() -> List[int]:
    """The length of every break in docs/workshop.md's plans (table rows whose notebook column reads "break")."""
    rows = re.findall(r"^\|\s*(\d+)\s*\|\s*—\s*\|\s*break\s*\|", WORKSHOP.read_text(), re.M)
    return [int(minutes) for minutes in rows]


def test_a_tab_left_open_over_a_break_keeps_its_kernel_and_the_guides_say_so():
    breaks = planned_breaks_minutes()
    assert breaks, "docs/workshop.md plans no break: did the table format change?"
    timeout_minutes = lab.culling_settings()["cull_idle_timeout"] // 60
    assert timeout_minutes >= 2 * max(breaks), f"culling after {timeout_minutes} min, breaks of up to {max(breaks)}"
    for guide in (WORKSHOP, HOSTING):
        assert f"{timeout_minutes} minutes" in guide.read_text(), f"{guide.name} does not give the culling timeout"


def test_the_readme_opens_the_course_with_the_launcher():
    readme = (ROOT / "README.md").read_text()
    assert "pip install -r requirements.txt && python -m helpers.lab" in readme


def test_the_launcher_opens_the_first_notebook_unless_told_otherwise(monkeypatch):
    monkeypatch.chdir(ROOT)
    assert lab.lab_command([])[-1] == str(lab.FIRST_NOTEBOOK)
    assert lab.lab_command(["notebooks/03_inplace_version.ipynb"])[-1] == "notebooks/03_inplace_version.ipynb"
    assert lab.lab_command(["--port=9999"])[-2:] == ["--port=9999", str(lab.FIRST_NOTEBOOK)]
    assert lab.lab_command([])[:3] == [sys.executable, "-m", "jupyterlab"]


def test_hostings_sizing_block_is_the_one_the_recorded_session_gives():
    assert sizing.quoted_block() == sizing.sizing_markdown(sizing.load_figures()), (
        "docs/hosting.md's sizing block differs from docs/whole_session.json: run "
        "python -m authoring.whole_session --python build/binder-venv/bin/python --write docs/whole_session.json")


def test_the_recorded_session_ran_every_notebook_of_the_course_and_fits():
    figures = sizing.load_figures()
    recorded = [row["notebook"] for row in figures["notebooks"]]
    assert recorded == [path.name for path in course_notebooks(ROOT / "solutions")], "record the session again"
    assert figures["failed_cells"] == [] and figures["peak_mib"] < figures["without_culling_mib"]
    assert figures["cull_idle_timeout_s"] < lab.culling_settings()["cull_idle_timeout"]


def _python_args(text: str) -> Dict[str, str]:
    return dict(re.findall(r'"--MappingKernelManager\.(\w+)=(\w+)"', text))


def _yaml_settings(text: str) -> Dict[str, str]:
    block = text.split("MappingKernelManager:", 1)[1].split("```", 1)[0]
    return dict(re.findall(r"^\s+(cull_\w+): (\w+)", block, re.M))


def test_the_hub_recipes_give_the_same_culling_settings_as_the_course():
    text = HOSTING.read_text()
    expected = {key: str(value) for key, value in lab.culling_settings().items()}
    assert _python_args(text) == expected, "the TLJH Spawner.args in docs/hosting.md"
    assert {k: v.capitalize() if v in ("true", "false") else v for k, v in _yaml_settings(text).items()} == expected, (
        "the Z2JH singleuser.extraFiles block in docs/hosting.md")


def threads_binder_start_sets(tmp_path: Path, cpu_max: str, preset: str = "") -> str:
    """OMP_NUM_THREADS as a command started through binder/start sees it, with cgroup cpu.max reading ``cpu_max``."""
    (tmp_path / "cpu.max").write_text(cpu_max + "\n")
    environment = {key: value for key, value in os.environ.items() if key not in ("OMP_NUM_THREADS",)}
    environment["COURSE_CPU_MAX"] = str(tmp_path / "cpu.max")
    if preset:
        environment["OMP_NUM_THREADS"] = preset
    shown = subprocess.run(["bash", str(ROOT / "binder" / "start"), sys.executable, "-c",
                            "import os; print(os.environ.get('OMP_NUM_THREADS', 'unset'))"],
                           env=environment, capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    return shown.stdout.strip()


def test_binder_start_sizes_torchs_threads_to_the_containers_cpu_limit(tmp_path):
    assert threads_binder_start_sets(tmp_path, "100000 100000") == "1"
    assert threads_binder_start_sets(tmp_path, "150000 100000") == "2"   # 1.5 cores: round up
    assert threads_binder_start_sets(tmp_path, "max 100000") == "unset"  # no limit: torch's own default
    assert threads_binder_start_sets(tmp_path, "100000 100000", preset="3") == "3"  # an explicit choice stays
