"""Only one thing pyproject.toml cannot say: the teaching notebooks go into the wheel.

They live in ``notebooks/`` at the top of the repository (where GitHub, the docs site
and ``make lab`` find them) and are copied to ``agentlab/_notebooks/`` in the built
package, where ``agentlab notebooks DIR`` copies them out for a pip user.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildWithNotebooks(build_py):
    def run(self) -> None:
        super().run()
        source = Path(__file__).resolve().parent / "notebooks"
        target = Path(self.build_lib) / "agentlab" / "_notebooks"
        target.mkdir(parents=True, exist_ok=True)
        for notebook in sorted(source.glob("*.ipynb")):
            shutil.copy2(notebook, target / notebook.name)


setup(cmdclass={"build_py": BuildWithNotebooks})
