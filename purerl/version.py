"""The version of purerl, written into every checkpoint's record."""

__version__ = "0.2.0"
