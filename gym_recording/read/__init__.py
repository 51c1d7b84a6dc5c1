"""The read layer: recordings opened as sequences of episodes, and what users do with them.

- :mod:`~gym_recording.read.recording`: :func:`load` and :class:`Recording`.
- :mod:`~gym_recording.read.episode`: :class:`Episode`.
- :mod:`~gym_recording.read.transitions`: minibatches of transitions.
- :mod:`~gym_recording.read.notebook` and :mod:`~gym_recording.read.replay`: the tables,
  plots, frames, animations and replays behind the methods of ``Recording`` and ``Episode``
  (here rather than among the tools because those methods are the reader's API).
"""
