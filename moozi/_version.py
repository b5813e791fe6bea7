"""The package version, in one place below every other module (checkpoints and GTP record it)."""

__version__ = "0.1.0"
