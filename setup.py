"""Build the optional C step recorder; everything else is configured in pyproject.toml.

``gym_recording.record._speedups`` stores the commonest steps in C (see
``gym_recording/record/steps.py``). It is optional: if it cannot be compiled (no C
compiler), the install still succeeds and the library records the same steps in Python.
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
