"""Side by side: the libraries gym-recording could use for its batch JSON and step packing.

Times, in one process and interleaved run by run, what each candidate costs per episode on
a batch as the recorder writes it (CartPole-like: float32[4] observations, Discrete actions,
37 steps per episode, 2000 episodes):

- decoding a batch JSON: ``json.loads``, ``orjson.loads`` (if installed), ``msgspec`` into
  plain objects, and ``msgspec`` into the schema's structs (what the reader uses);
- encoding one: ``json.dumps`` and ``orjson.dumps`` of dicts, ``msgspec`` of the structs
  (what the writer uses);
- packing a batch's Discrete actions: a ``bytearray`` appended per step (what the buffer
  does), ``np.fromiter`` over Python ints, ``np.array`` of the list.

    python benchmarks/libraries.py
"""

from __future__ import annotations

import json
import statistics
import struct
import time
from collections.abc import Callable
from typing import Any

import msgspec
import numpy as np

from gym_recording.format.batch import Span, finish_batch, lay_out_batch
from gym_recording.format.wire import Batch

EPISODES, STEPS, RUNS = 2000, 37, 9


def _batch() -> bytes:
    n = EPISODES * STEPS
    obs = np.random.default_rng(0).random((n + EPISODES, 4), dtype=np.float32)
    act = np.arange(n, dtype=np.int64) % 2
    rew = np.ones(n)
    spans = [
        Span(
            i * (STEPS + 1),
            (i + 1) * (STEPS + 1),
            i * STEPS,
            (i + 1) * STEPS,
            {"terminated": True, "started_at": 1.7e9 + i, "ended_at": 1.7e9 + i + 0.5},
            None,
            None,
        )
        for i in range(EPISODES)
    ]
    return finish_batch(*lay_out_batch(obs, act, rew, spans, "b.bin"), None)[0]


def _time(f: Callable[[], Any]) -> float:
    t = time.perf_counter()
    f()
    return time.perf_counter() - t


def main() -> None:
    data = _batch()
    plain = json.loads(data)
    typed = msgspec.json.decode(data, type=Batch)
    typed_decoder = msgspec.json.Decoder(Batch)
    any_decoder = msgspec.json.Decoder()
    encoder = msgspec.json.Encoder()
    try:
        import orjson
    except ImportError:
        orjson = None
    pack = struct.Struct("<q").pack
    actions = [i % 2 for i in range(EPISODES * STEPS)]

    def packed() -> bytes:
        buf = bytearray()
        for a in actions:
            buf += pack(a)
        return bytes(buf)

    cases: dict[str, Callable[[], Any]] = {
        "decode: json.loads": lambda: json.loads(data),
        "decode: msgspec, plain objects": lambda: any_decoder.decode(data),
        "decode: msgspec, the schema's structs": lambda: typed_decoder.decode(data),
        "encode: json.dumps of dicts": lambda: json.dumps(plain).encode(),
        "encode: msgspec of the structs": lambda: encoder.encode(typed),
        "pack actions: bytearray per step": packed,
        "pack actions: np.fromiter": lambda: np.fromiter(actions, np.int64, len(actions)),
        "pack actions: np.array of the list": lambda: np.array(actions, np.int64),
    }
    if orjson is not None:
        cases["decode: orjson.loads"] = lambda: orjson.loads(data)
        cases["encode: orjson.dumps of dicts"] = lambda: orjson.dumps(plain)
    times: dict[str, list[float]] = {k: [] for k in cases}
    for r in range(RUNS):
        for k in cases if r % 2 == 0 else reversed(list(cases)):
            times[k].append(_time(cases[k]))
    print(f"{len(data) / EPISODES:.0f} bytes of batch JSON per episode; medians of {RUNS} runs")
    print()
    print("| what | µs per episode | each run |")
    print("|---|---|---|")
    for k, ts in times.items():
        per = [t / EPISODES * 1e6 for t in ts]
        print(f"| {k} | {statistics.median(per):.2f} | {min(per):.2f}-{max(per):.2f} |")


if __name__ == "__main__":
    main()
