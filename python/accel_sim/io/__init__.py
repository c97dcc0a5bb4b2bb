"""Files <-> core structures: device files, graph files. Validation errors name the file and key."""
