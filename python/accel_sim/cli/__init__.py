"""The `accel-sim` command line."""
