"""Device profiles in the spelling of the original accel-sim (`accel_sim.devices.profiles`)."""
