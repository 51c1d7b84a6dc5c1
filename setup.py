"""Build the optional C extension; everything else is configured in pyproject.toml.

``gym_recording._speedups`` holds the accelerated pieces (see ``gym_recording/_accel.py``):
the commonest steps stored in C, batch files written on a thread without the GIL, and a
batch's arrays viewed. It is optional: if it cannot be compiled (no C compiler), the install
still succeeds and the library writes and reads the same files in Python.
"""

import numpy
from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "gym_recording._speedups",
            ["gym_recording/_speedups.c"],
            include_dirs=[numpy.get_include()],
            optional=True,
        )
    ]
)
