"""The version of wfrl, declared once: pyproject.toml reads it from here (setuptools' dynamic
version), the package exports it as wfrl.__version__ and run records store it."""

__version__ = "0.1.0"
