"""Each command of accel-sim as a library, below the command line: its options (one argparse tree,
parser.py, which the CLI parses, grid files read and the Python API fills in) and its run, from the
options to the core's results (train.py, plan.py, serve.py, simulate.py). Nothing here prints;
accel_sim.report renders what a run returns, and accel_sim.cli prints it (the one exception: the
parser's --version action prints the version, as argparse's own does)."""
