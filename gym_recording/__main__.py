"""``python -m gym_recording``: the command line."""

import sys

from gym_recording.tools.cli import main

if __name__ == "__main__":
    sys.exit(main())
