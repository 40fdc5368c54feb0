"""perfkit's version, where every layer may read it (the package re-exports it)."""
__version__ = "0.1.0"
