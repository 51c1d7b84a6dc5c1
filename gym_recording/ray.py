"""Read recordings with Ray Data: :func:`read_traces` (``pip install "gym-recording[ray]"``).

Ray is imported only when :func:`read_traces` is called; the implementation is in
:mod:`gym_recording.tools.ray`.
"""

from gym_recording.tools.ray import read_traces

__all__ = ["read_traces"]
