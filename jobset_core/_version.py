"""The project's version: the one place it is written.

``pyproject.toml`` reads it at build time (``[tool.setuptools.dynamic]``), the packages import
it, and the KFP launcher image's tag is made from it. This module imports nothing.
"""

__version__ = "0.1.0"
