"""Open the course in JupyterLab with the course's launch configuration: ``python -m helpers.lab``.

The configuration (``helpers/jupyter_config/jupyter_server_config.json``) lets the server shut down the kernel of a
notebook nobody has run for 30 minutes, even with its tab still open, and never a kernel that is running a cell.
Every open notebook keeps a kernel of 200 to 400 MiB; without this, a learner who leaves each notebook open on
Binder passes its 2 GB limit before the end of the course. Binder (``binder/start``) and the JupyterHub recipes in
docs/hosting.md use the same folder, through the same ``JUPYTER_CONFIG_PATH`` variable.

A culled notebook keeps its code and outputs in the browser: Kernel > Restart Kernel and Run All Cells brings it back.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence

CONFIG_DIR = Path(__file__).resolve().parent / "jupyter_config"
CONFIG_PATH_VARIABLE = "JUPYTER_CONFIG_PATH"
FIRST_NOTEBOOK = Path("notebooks") / "00_start_here.ipynb"


def config_dir() -> Path:
    """The folder holding the course's ``jupyter_server_config.json``."""
    return CONFIG_DIR


def culling_settings() -> Dict[str, Any]:
    """The kernel-culling settings the course's launch configuration gives the server."""
    config = json.loads((CONFIG_DIR / "jupyter_server_config.json").read_text(encoding="utf-8"))
    return dict(config["MappingKernelManager"])


def launch_environment(environment: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """``environment`` (default: this process's) with the course's config folder first on JUPYTER_CONFIG_PATH.

    Jupyter reads a user's own ``~/.jupyter`` before this path, so a learner's own settings still win.
    """
    result = dict(os.environ if environment is None else environment)
    folders = [str(CONFIG_DIR)] + [f for f in result.get(CONFIG_PATH_VARIABLE, "").split(os.pathsep) if f]
    result[CONFIG_PATH_VARIABLE] = os.pathsep.join(dict.fromkeys(folders))
    return result


def lab_command(arguments: Sequence[str]) -> List[str]:
    """``jupyter lab`` with ``arguments``, run by this Python; the first notebook when no argument names a file."""
    opens_something = any(not argument.startswith("-") for argument in arguments)
    first = [str(FIRST_NOTEBOOK)] if not opens_something and FIRST_NOTEBOOK.is_file() else []
    return [sys.executable, "-m", "jupyterlab", *arguments, *first]


def main(argv: Optional[Sequence[str]] = None) -> None:
    """Replace this process with JupyterLab, started with the course's launch configuration."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    command = lab_command(arguments)
    print(f"Kernels idle for {culling_settings()['cull_idle_timeout'] // 60} minutes are shut down "
          f"(config: {CONFIG_DIR}).", flush=True)
    os.execvpe(command[0], command, launch_environment())


if __name__ == "__main__":
    main()
