"""The version of this accel-sim, as pyproject.toml declares it (`accel-sim --version`, grid journals
and Ray workers compare it)."""

__version__ = "0.1.0"
