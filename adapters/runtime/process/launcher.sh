#!/bin/sh
# The executable the Claude Agent SDK starts for every cpe run (its cli_path). It is part of
# cpe, never written while cpe runs; it hands the run's launch script, which cpe wrote just
# before and names in CPE_LAUNCH_SCRIPT, to sh to read. Why the run's script is never
# executed itself: adapters/runtime/process/launcher.py.
: "${CPE_LAUNCH_SCRIPT:?is set by cpe for each agent run}"
exec /bin/sh "$CPE_LAUNCH_SCRIPT" "$@"
