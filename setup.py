"""Build the optional C speedup; everything else is configured in pyproject.toml.

``gym_recording._speedups`` records a step in C for the commonest layouts. It is optional: if
it cannot be compiled (no C compiler), the install still succeeds and the library runs the
same recording in pure Python.
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
