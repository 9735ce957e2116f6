"""The version of dedup, in a module of its own so that every layer can name it without importing the API."""

__version__ = "0.1.0"
