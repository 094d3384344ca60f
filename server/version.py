"""The distribution's version, one place for the package and its clients."""

__version__ = "0.1.0"
