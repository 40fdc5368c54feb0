"""perfkit's own exceptions (bad specs are plain ValueError)."""


class EngineError(RuntimeError):
    """The engine could not start, or a worker failed during the run."""
