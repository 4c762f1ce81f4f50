"""The package's metadata is in setup.cfg; this adds one build step: Spark's half of the
fold, built with Maven into a jar per supported Spark minor version
(build_jars.py), which the wheel ships as package data."""

import runpy
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildWithJars(build_py):
    def run(self):
        runpy.run_path(str(Path(__file__).resolve().parent / "build_jars.py"))["build"]()
        super().run()


setup(cmdclass={"build_py": BuildWithJars})
