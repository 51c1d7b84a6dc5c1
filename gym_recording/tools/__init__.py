"""The tools layer: what users run on recordings, built on the reader and the recorder.

- :mod:`~gym_recording.tools.cli`: the ``gym-recording`` command line.
- :mod:`~gym_recording.tools.verify`: ``verify``, checking every file.
- :mod:`~gym_recording.tools.viewer`: the browser viewer and its read-only local server.
- :mod:`~gym_recording.tools.export`: Parquet, npz and Minari exports, Minari imports.
- :mod:`~gym_recording.tools.ray`: reading with Ray Data.
- :mod:`~gym_recording.tools.transfer`: copies to and from S3.
"""
