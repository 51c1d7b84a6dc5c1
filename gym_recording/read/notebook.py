"""Notebook helpers behind :class:`~gym_recording.Recording` and :class:`~gym_recording.Episode`.

Tables (pandas), plots (matplotlib), frames and inline animations, and replay through the
environment. pandas and matplotlib are imported lazily, on first use, through the ``notebook``
extra; nothing here imports IPython. The reader's methods (``Recording.summary()``,
``Episode.plot()``...) delegate to the functions of this module.
"""

from __future__ import annotations

import datetime
import html
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from gym_recording._errors import NoFramesError, RecordingError
from gym_recording._optional import require
from gym_recording._progress import progress
from gym_recording.format.fields import field_step, leaves, slice_field
from gym_recording.format.limits import fits_int64
from gym_recording.format.spaces import space_from_json
from gym_recording.format.values import stack_steps

# (Episode and Recording are not imported: they import this module. Their methods pass
# themselves in.)
Episode = Any
Recording = Any

__all__ = [
    "Animation",
    "NoFramesError",
    "animate",
    "episode_frames",
    "episode_html",
    "episode_plot",
    "episode_to_pandas",
    "recording_html",
    "recording_plot_returns",
    "recording_steps",
    "recording_summary",
    "step_flags",
]

#: Episodes listed by a recording's HTML repr.
REPR_EPISODES = 10
#: A per-step array with at most this many components becomes one column per component.
MAX_COLUMNS = 16


# --------------------------------------------------------------------------------------------
# Fields: observations/actions as arrays, dicts/tuples of fields, or lists of per-step values
# --------------------------------------------------------------------------------------------


def _numeric(leaf: Any) -> bool:
    return isinstance(leaf, np.ndarray) and leaf.dtype.kind in "biuf"


#: The fewest pixels a side of a picture has: smaller uint8 arrays are symbolic grids.
MIN_PICTURE_SIDE = 16
#: The most frames a frame stack holds.
MAX_STACK = 16


def _picture_frames(leaf: Any) -> np.ndarray | None:
    """A leaf's steps as frames ``[T, H, W, C]`` if they are pictures (see Episode.frames)."""
    if not isinstance(leaf, np.ndarray) or leaf.dtype != np.uint8 or leaf.ndim < 3:
        return None
    shape = leaf.shape[1:]
    if len(shape) == 3 and shape[2] not in (1, 3, 4) and 2 <= shape[0] <= MAX_STACK:
        leaf, shape = leaf[:, -1, :, :, np.newaxis], (*shape[1:], 1)  # [k, H, W]: the newest
    elif len(shape) == 4 and shape[3] in (1, 3) and 2 <= shape[0] <= MAX_STACK:
        leaf, shape = leaf[:, -1], shape[1:]  # [k, H, W, C]
    elif len(shape) == 2:
        leaf, shape = leaf[..., np.newaxis], (*shape, 1)
    if len(shape) != 3 or shape[2] not in (1, 3, 4) or min(shape[:2]) < MIN_PICTURE_SIDE:
        return None
    return leaf


def _stack(leaf: Any) -> Any:
    return stack_steps(leaf) if isinstance(leaf, list) else leaf


def _describe_field(f: Any, name: str) -> str:
    parts = []
    for leaf_name, leaf in leaves(f, name):
        label = leaf_name[len(name) + 1 :] or "value"
        if isinstance(leaf, np.ndarray):
            parts.append(f"{label}: {leaf.dtype} {list(leaf.shape)}")
        else:
            parts.append(f"{label}: list of {len(leaf)}")
    if len(parts) == 1:  # a single leaf needs no label
        return parts[0].split(": ", 1)[1]
    return "; ".join(parts) or "-"


def _short(value: Any, width: int = 60) -> str:
    """A one-line repr of a value, cut to ``width`` characters."""
    if isinstance(value, np.ndarray):
        if value.size > 16:
            text = f"{value.dtype} array {list(value.shape)}"
        else:
            text = np.array2string(value, precision=4, separator=", ", threshold=16)
    elif isinstance(value, np.generic):
        text = repr(value.item())
    elif isinstance(value, dict):
        text = "{" + ", ".join(f"{k}: {_short(v, 20)}" for k, v in value.items()) + "}"
    elif isinstance(value, tuple):
        text = "(" + ", ".join(_short(v, 20) for v in value) + ")"
    else:
        text = repr(value)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _time(t: float | None) -> str:
    if t is None:
        return "-"
    try:
        when = datetime.datetime.fromtimestamp(t, tz=datetime.timezone.utc)
    except (OverflowError, ValueError, OSError):  # (no date: the seconds as recorded)
        return f"{t:g} s"
    return when.strftime("%Y-%m-%d %H:%M:%S UTC")


# --------------------------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------------------------


def _object_column(values: Iterable[Any], n: int) -> np.ndarray:
    col = np.empty(n, dtype=object)
    for i, v in enumerate(values):
        col[i] = v
    return col


def _field_columns(f: Any, name: str, n: int, max_columns: int) -> dict[str, Any]:
    """Columns for the ``n`` steps of a field: one per scalar leaf or low-dim component."""
    out: dict[str, Any] = {}
    for leaf_name, leaf in leaves(f, name):
        if _numeric(leaf) and leaf.ndim == 1:
            out[leaf_name] = np.asarray(leaf)
        elif (
            _numeric(leaf)
            and _picture_frames(leaf) is None
            and math.prod(leaf.shape[1:]) <= max_columns
        ):
            flat = np.asarray(leaf).reshape(n, math.prod(leaf.shape[1:]))
            for i in range(flat.shape[1]):
                out[f"{leaf_name}_{i}"] = flat[:, i]
        else:
            out[leaf_name] = _object_column(leaf, n)
    return out


def step_flags(ep: Episode) -> tuple[np.ndarray, np.ndarray]:
    """``terminated`` and ``truncated`` per step: false, but on the last step the episode's."""
    terminated = np.zeros(ep.length, dtype=bool)
    truncated = np.zeros(ep.length, dtype=bool)
    if ep.length:
        terminated[-1], truncated[-1] = ep.terminated, ep.truncated
    return terminated, truncated


def _episode_columns(
    ep: Episode, *, next_obs: bool, max_columns: int, episode_column: bool
) -> dict[str, Any]:
    n = ep.length
    cols: dict[str, Any] = {}
    if episode_column:
        cols["episode"] = np.full(n, ep.index, dtype=np.int64)
    cols["step"] = np.arange(n, dtype=np.int64)
    cols.update(_field_columns(slice_field(ep.observations, 0, n), "obs", n, max_columns))
    cols.update(_field_columns(ep.actions, "action", n, max_columns))
    cols["reward"] = np.asarray(ep.rewards, dtype=np.float64)
    cols["terminated"], cols["truncated"] = step_flags(ep)
    if next_obs:
        cols.update(
            _field_columns(slice_field(ep.observations, 1, None), "next_obs", n, max_columns)
        )
    return cols


def episode_to_pandas(
    ep: Episode, *, next_obs: bool = False, max_columns: int = MAX_COLUMNS
) -> Any:
    """See :meth:`gym_recording.Episode.to_pandas`."""
    pd = require("pandas", "notebook", "Episode.to_pandas()")
    cols = _episode_columns(ep, next_obs=next_obs, max_columns=max_columns, episode_column=False)
    return pd.DataFrame(cols)


def _select(rec: Recording, episodes: Any) -> Iterable[int]:
    if episodes is None:
        return range(len(rec))
    if isinstance(episodes, slice):
        return range(*episodes.indices(len(rec)))
    if isinstance(episodes, (int, np.integer)) and not isinstance(episodes, (bool, np.bool_)):
        return [int(episodes)]
    try:
        chosen = list(episodes)
    except TypeError:
        msg = f"expected episodes as an index, a slice, indices or a mask, got {episodes!r}"
        raise TypeError(msg) from None
    if chosen and all(isinstance(i, (bool, np.bool_)) for i in chosen):  # a mask
        if len(chosen) != len(rec):
            msg = (
                f"a mask of episodes has one bool per episode: expected {len(rec)}, got "
                f"{len(chosen)} (pass indices to choose a few)"
            )
            raise ValueError(msg)
        return [i for i, keep in enumerate(chosen) if keep]
    for i in chosen:
        if not isinstance(i, (int, np.integer)) or isinstance(i, (bool, np.bool_)):
            msg = f"expected episode indices (ints) or a mask (bools), got {i!r} among them"
            raise TypeError(msg)
    return [int(i) for i in chosen]


def recording_steps(
    rec: Recording,
    episodes: Any = None,
    *,
    next_obs: bool = False,
    max_columns: int = MAX_COLUMNS,
) -> Any:
    """See :meth:`gym_recording.Recording.steps`."""
    pd = require("pandas", "notebook", "Recording.steps()")
    chosen = list(_select(rec, episodes))
    parts = [
        _episode_columns(rec[i], next_obs=next_obs, max_columns=max_columns, episode_column=True)
        for i in progress(chosen, total=len(chosen), desc="steps")
    ]
    if not parts:
        return pd.DataFrame(
            {
                "episode": np.zeros(0, np.int64),
                "step": np.zeros(0, np.int64),
                "reward": np.zeros(0, np.float64),
                "terminated": np.zeros(0, bool),
                "truncated": np.zeros(0, bool),
            }
        )
    parts = [p for p in parts if len(p["step"])] or parts  # (no rows: no columns to add)
    keys = list(parts[0])
    if all(list(p) == keys for p in parts):
        merged: dict[str, Any] = {}
        for k in keys:
            cols = [p[k] for p in parts]
            if all(c.dtype != object for c in cols) and len({c.dtype for c in cols}) == 1:
                merged[k] = np.concatenate(cols)
            else:
                merged[k] = _object_column((v for c in cols for v in c), sum(len(c) for c in cols))
        return pd.DataFrame(merged)
    # Episodes stored differently (a writer fell back to per-step values): let pandas align.
    return pd.concat([pd.DataFrame(p) for p in parts], ignore_index=True)


def recording_summary(rec: Recording) -> Any:
    """See :meth:`gym_recording.Recording.summary`."""
    pd = require("pandas", "notebook", "Recording.summary()")
    keys = "index writer length total_reward terminated truncated seed started_at ended_at"
    rows: dict[str, list[Any]] = {k: [] for k in keys.split()}
    for ep in progress(rec, total=len(rec), desc="summary"):
        for k, values in rows.items():
            values.append(getattr(ep, k))
    int64s = all(s is None or fits_int64(s) for s in rows["seed"])  # (else Python ints)
    df = pd.DataFrame(
        {
            "writer": pd.Series(rows["writer"], dtype=object),
            "length": pd.Series(rows["length"], dtype="int64"),
            "total_reward": pd.Series(rows["total_reward"], dtype="float64"),
            "terminated": pd.Series(rows["terminated"], dtype=bool),
            "truncated": pd.Series(rows["truncated"], dtype=bool),
            "seed": pd.Series(rows["seed"], dtype="Int64" if int64s else object),
        },
    )
    df.index = pd.Index(rows["index"], dtype="int64", name="index")
    if any(t is not None for t in rows["started_at"] + rows["ended_at"]):
        start = np.array([np.nan if t is None else t for t in rows["started_at"]], np.float64)
        end = np.array([np.nan if t is None else t for t in rows["ended_at"]], np.float64)
        df["started_at"] = pd.to_datetime(start, unit="s", utc=True)
        df["ended_at"] = pd.to_datetime(end, unit="s", utc=True)
        df["duration"] = end - start
    return df


# --------------------------------------------------------------------------------------------
# HTML reprs (cheap: manifests plus the first few episodes)
# --------------------------------------------------------------------------------------------

_STYLE = (
    "<style>.gymrec table{border-collapse:collapse;font-size:12px}"
    ".gymrec th,.gymrec td{padding:2px 8px;text-align:left;border-bottom:1px solid #ddd}"
    ".gymrec caption{text-align:left;font-weight:bold;padding:4px 0}</style>"
)


def _kv_table(rows: list[tuple[str, Any]], caption: str) -> str:
    body = "".join(
        f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(str(v))}</td></tr>" for k, v in rows
    )
    return f"<table><caption>{html.escape(caption)}</caption>{body}</table>"


def _grid(header: list[str], rows: list[list[Any]], caption: str = "") -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows
    )
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return f"<table>{cap}<tr>{head}</tr>{body}</table>"


def _ending(ep: Episode) -> str:
    """How an episode ended: ``terminated``, ``truncated`` or ``cut`` (by a reset or a close)."""
    return "terminated" if ep.terminated else "truncated" if ep.truncated else "cut"


def _space_text(manifests: list[Any], key: str) -> str:
    for m in manifests:
        d = getattr(m, key)
        if d is not None:
            try:
                return _short(space_from_json(d), 120)
            except RecordingError:
                return "(unreadable)"
    return "(not recorded)"


def recording_html(rec: Recording, max_episodes: int = REPR_EPISODES) -> str:
    """See :meth:`gym_recording.Recording._repr_html_`."""
    manifests = rec.writers
    batches = [b for m in manifests for b in m.batches]
    steps: Any = sum(b.steps or 0 for b in batches)
    if any(b.steps is None for b in batches):
        steps = f"≥ {steps}" if steps else "(not listed)"
    size = sum(b.bytes or 0 for b in batches)
    info: list[tuple[str, Any]] = [
        ("directory", rec.directory),
        ("env", rec.env_id or "(not recorded)"),
        ("episodes", len(rec)),
        ("steps", steps),
        ("writers", len(manifests)),
        ("batches", len(batches)),
    ]
    if size:
        info.append(("bytes", f"{size:,}"))
    info += [
        ("observation space", _space_text(manifests, "observation_space")),
        ("action space", _space_text(manifests, "action_space")),
    ]
    if rec.metadata:
        info.append(("metadata", _short(rec.metadata, 120)))
    out = [_STYLE, '<div class="gymrec">', _kv_table(info, "Recording")]
    if rec.closed:
        out.append("<p>(closed)</p>")
    elif len(rec):
        shown = min(len(rec), max_episodes)
        rows = []
        for i in range(shown):
            try:
                ep = rec[i]
            except RecordingError as exc:
                rows.append([i, "", "", "", f"unreadable: {exc}", "", ""])
                continue
            rows.append(
                [
                    ep.index,
                    ep.writer,
                    ep.length,
                    f"{ep.total_reward:g}",
                    _ending(ep),
                    "-" if ep.seed is None else ep.seed,
                    _time(ep.started_at),
                ]
            )
        caption = f"first {shown} of {len(rec)} episodes" if shown < len(rec) else "episodes"
        out.append(
            _grid(
                ["index", "writer", "length", "return", "ended", "seed", "started"], rows, caption
            )
        )
    out.append("</div>")
    return "".join(out)


def episode_html(ep: Episode, max_steps: int = 5) -> str:
    """See :meth:`gym_recording.Episode._repr_html_`."""
    rows: list[tuple[str, Any]] = [
        ("index", ep.index),
        ("writer", ep.writer or "-"),
        ("env", ep.env_id or "-"),
        ("length", ep.length),
        ("return", f"{ep.total_reward:g}"),
        ("ended", _ending(ep)),
        ("seed", "-" if ep.seed is None else ep.seed),
    ]
    if ep.options is not None:
        rows.append(("options", _short(ep.options, 120)))
    if ep.started_at is not None:
        rows.append(("started", _time(ep.started_at)))
    if ep.started_at is not None and ep.ended_at is not None:
        rows.append(("duration", f"{ep.ended_at - ep.started_at:.3f} s"))
    rows += [
        ("observations", _describe_field(ep.observations, "obs")),
        ("actions", _describe_field(ep.actions, "action")),
    ]
    if ep.length:
        r = np.asarray(ep.rewards, dtype=np.float64)
        rows.append(("rewards", f"min {r.min():g}, mean {r.mean():g}, max {r.max():g}"))
    if ep.infos is not None:
        rows.append(("infos", f"{len(ep.infos)} recorded"))
    out = [_STYLE, '<div class="gymrec">', _kv_table(rows, f"Episode {ep.index}")]
    shown = min(ep.length, max_steps)
    if shown:
        steps = [
            [
                t,
                _short(field_step(ep.observations, t)),
                _short(field_step(ep.actions, t), 30),
                f"{float(ep.rewards[t]):g}",
            ]
            for t in range(shown)
        ]
        caption = f"first {shown} of {ep.length} steps" if shown < ep.length else "steps"
        out.append(_grid(["step", "observation", "action", "reward"], steps, caption))
    out.append("</div>")
    return "".join(out)


# --------------------------------------------------------------------------------------------
# Plots
# --------------------------------------------------------------------------------------------


def _pyplot(what: str) -> Any:
    require("matplotlib", "notebook", what)
    return require("matplotlib.pyplot", "notebook", what)


def rolling_mean(values: np.ndarray, window: int) -> np.ndarray:
    """The trailing mean over ``window`` values (fewer at the start).

    Example:
        >>> rolling_mean(np.array([1.0, 3.0, 5.0, 7.0]), 2).tolist()
        [1.0, 2.0, 4.0, 6.0]
    """
    values = np.asarray(values, dtype=np.float64)
    c = np.concatenate([[0.0], np.cumsum(values)])
    idx = np.arange(1, len(values) + 1)
    lo = np.maximum(idx - window, 0)
    return (c[idx] - c[lo]) / (idx - lo)


def recording_plot_returns(rec: Recording, window: int = 10, ax: Any = None) -> Any:
    """See :meth:`gym_recording.Recording.plot_returns`."""
    if not isinstance(window, int) or isinstance(window, bool) or window < 1:
        msg = f"expected window to be a positive int, got {window!r}"
        raise ValueError(msg)
    plt = _pyplot("Recording.plot_returns()")
    index, returns = [], []
    for ep in progress(rec, total=len(rec), desc="returns"):
        index.append(ep.index)
        returns.append(ep.total_reward)
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 3.5))
    x = np.asarray(index)
    y = np.asarray(returns, dtype=np.float64)
    ax.plot(x, y, ".", alpha=0.5 if len(y) > 50 else 0.8, label="return")
    if len(y):
        w = min(window, len(y))
        ax.plot(x, rolling_mean(y, w), "-", linewidth=2, label=f"rolling mean ({w} episodes)")
    ax.set_xlabel("episode")
    ax.set_ylabel("return")
    ax.set_title(f"{rec.env_id or 'recording'}: {len(y)} episodes")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best", fontsize="small")
    return ax


def _plot_leaf(ax: Any, leaf: np.ndarray, label: str, max_dims: int) -> None:
    """Draw a leaf's components against the step (integers as steps: they jump)."""
    n = leaf.shape[0]
    flat = leaf.reshape(n, math.prod(leaf.shape[1:])) if leaf.ndim > 1 else leaf
    flat = flat.astype(np.float64)
    x = np.arange(n)
    kw = {"drawstyle": "steps-post"} if leaf.dtype.kind in "biu" else {}
    if flat.ndim == 1:
        ax.plot(x, flat, label=label, **kw)
    else:
        for i in range(min(flat.shape[1], max_dims)):
            ax.plot(x, flat[:, i], label=f"{label}[{i}]", linewidth=1, **kw)
        if flat.shape[1] > max_dims:
            ax.text(
                0.99,
                0.02,
                f"first {max_dims} of {flat.shape[1]} components",
                transform=ax.transAxes,
                ha="right",
                fontsize="small",
            )


def _plottable(f: Any, name: str) -> tuple[list[tuple[str, np.ndarray]], list[str]]:
    """The numeric leaves of a field to plot, and the names of its picture leaves (not plotted)."""
    numbers, pictures = [], []
    for leaf_name, raw in leaves(f, name):
        leaf = _stack(raw)
        if _picture_frames(leaf) is not None:
            pictures.append(leaf_name)
        elif _numeric(leaf) and leaf.ndim >= 1:
            numbers.append((leaf_name, leaf))
    return numbers, pictures


def episode_plot(ep: Episode, *, max_dims: int = 8) -> Any:
    """See :meth:`gym_recording.Episode.plot`."""
    plt = _pyplot("Episode.plot()")
    actions, _ = _plottable(ep.actions, "action")
    observations, images = _plottable(ep.observations, "obs")
    panels = 1 + (1 if actions else 0) + len(observations)
    if not observations:
        panels += 1  # say why there is no observation plot
    fig, axes = plt.subplots(panels, 1, figsize=(8, 1.9 * panels + 0.6), sharex=True, squeeze=False)
    axes = axes[:, 0]
    ax = axes[0]
    x = np.arange(ep.length)
    rewards = np.asarray(ep.rewards, dtype=np.float64)
    ax.plot(x, rewards, drawstyle="steps-post", label="reward")
    ax.set_ylabel("reward")
    if ep.length:
        twin = ax.twinx()
        twin.plot(x, np.cumsum(rewards), color="tab:orange", linewidth=1, label="return so far")
        twin.set_ylabel("return")
    title = f"episode {ep.index}: {ep.length} steps, return {ep.total_reward:g}, {_ending(ep)}"
    ax.set_title(title)
    k = 1
    if actions:
        ax = axes[k]
        k += 1
        for name, leaf in actions:
            _plot_leaf(ax, leaf, name, max_dims)
        ax.set_ylabel("action")
        if (
            sum(
                1 if leaf.ndim == 1 else min(max_dims, math.prod(leaf.shape[1:]))
                for _, leaf in actions
            )
            > 1
        ):
            ax.legend(loc="upper right", fontsize="x-small", ncol=4)
    for name, leaf in observations:
        ax = axes[k]
        k += 1
        _plot_leaf(ax, leaf, name, max_dims)
        ax.set_ylabel(name if len(observations) > 1 else "observation")
        if leaf.ndim > 1 and math.prod(leaf.shape[1:]) > 1:
            ax.legend(loc="upper right", fontsize="x-small", ncol=4)
    if not observations:
        ax = axes[k]
        note = (
            f"image observations ({', '.join(images)}): use ep.show() or ep.frames()"
            if images
            else "no numeric observations to plot"
        )
        ax.text(0.5, 0.5, note, ha="center", va="center", transform=ax.transAxes)
        ax.set_yticks([])
    for a in axes:
        a.grid(True, alpha=0.3)
    axes[-1].set_xlabel("step")
    fig.tight_layout()
    return axes


# --------------------------------------------------------------------------------------------
# Frames and animations
# --------------------------------------------------------------------------------------------


def episode_frames(ep: Episode, key: str | None = None) -> np.ndarray:
    """See :meth:`gym_recording.Episode.frames`."""
    if key is None and ep.render_frames is not None:
        return ep.render_frames
    candidates: list[tuple[str | None, np.ndarray]] = []
    for name, raw in leaves(ep.observations, "obs"):
        frames = _picture_frames(_stack(raw))
        if frames is not None:
            candidates.append((name[4:] or None, frames))
    pictures = (
        f"(uint8 [H, W], [H, W, C] or a frame stack [k, H, W] per step, sides of at least "
        f"{MIN_PICTURE_SIDE} pixels); its observations are "
        f"{_describe_field(ep.observations, 'obs')}"
    )
    if key is not None:
        for cand, leaf in candidates:
            if cand == key:
                return leaf
        names = [n for n, _ in candidates if n is not None]
        keys = f"image keys are {names}" if names else "no Dict or Tuple key holds pictures"
        if any(n is None for n, _ in candidates):
            keys = "the observations are pictures themselves: ep.frames(), without a key"
        msg = f"no image observation {key!r} in episode {ep.index}: {keys} "
        if ep.render_frames is not None:
            pictures += ". Its rendered frames are ep.frames(), without a key"
        raise NoFramesError(msg + pictures)
    if not candidates:
        msg = (
            f"episode {ep.index} has no rendered frames and no image observations {pictures}. "
            "Record frames with record_render=True (gym-recording record --record-render), or "
            "render them by replaying the episode "
            "through its environment: ep.replay().frames, or ep.show(replay=True)"
        )
        raise NoFramesError(msg)
    preferred = ("pixels", "image", "rgb", "frame", "render")
    for pref in preferred:
        for cand, leaf in candidates:
            if cand is not None and cand.split(".")[-1] == pref:
                return leaf
    return candidates[0][1]


@dataclass(frozen=True)
class Animation:
    """An HTML/JavaScript animation of frames with a step slider; Jupyter displays it inline.

    Attributes:
        html: The self-contained HTML (frames embedded as PNG).
        frames: The number of frames embedded.
    """

    html: str
    frames: int

    def _repr_html_(self) -> str:
        return self.html

    def save(self, path: str) -> None:
        """Write the animation as a standalone HTML page."""
        with open(path, "w", encoding="utf-8") as f:
            f.write(f"<!DOCTYPE html><html><body>{self.html}</body></html>")

    def __repr__(self) -> str:
        return f"<Animation of {self.frames} frames ({len(self.html):,} bytes of HTML)>"


#: matplotlib's player draws its buttons with Font Awesome from a CDN; text works offline too.
_BUTTON_GLYPHS = {
    "fa fa-minus": "\u2212",
    "fa fa-fast-backward": "\u21e4",
    "fa fa-step-backward": "\u2039",
    "fa fa-play fa-flip-horizontal": "\u25c0",
    "fa fa-pause": "\u275a\u275a",
    "fa fa-play": "\u25b6",
    "fa fa-step-forward": "\u203a",
    "fa fa-fast-forward": "\u21e5",
    "fa fa-plus": "+",
}


def _offline_buttons(page: str) -> str:
    """Replace the player's Font Awesome icons (fetched from a CDN) by plain characters."""
    for cls, glyph in _BUTTON_GLYPHS.items():
        page = page.replace(f'<i class="{cls}"></i>', glyph)
    start = page.find('<link rel="stylesheet"')
    if start != -1 and "font-awesome" in page[start : page.find(">", start)]:
        page = page[:start] + page[page.find(">", start) + 1 :]
    return page


def animate(
    frames: np.ndarray,
    *,
    fps: float = 30,
    max_frames: int = 300,
    labels: list[str] | None = None,
    width: int | None = None,
) -> Animation:
    """Make an inline HTML/JS animation (with a step slider) of ``frames`` ``[T, H, W, C]``."""
    number = not isinstance(fps, bool) and isinstance(fps, (int, float, np.integer, np.floating))
    if not (number and 0 < fps < math.inf):
        msg = f"expected fps to be a positive number, got {fps!r}"
        raise ValueError(msg)
    if isinstance(max_frames, bool) or not isinstance(max_frames, (int, np.integer)):
        raise TypeError(f"expected max_frames to be an int, got {max_frames!r:.60}")
    if max_frames < 1:
        raise ValueError(f"expected max_frames to be at least 1, got {max_frames}")
    require("matplotlib", "notebook", "Episode.show()")
    from matplotlib import animation
    from matplotlib.figure import Figure

    frames = np.asarray(frames)
    if frames.ndim == 3:
        frames = frames[..., np.newaxis]
    if frames.ndim != 4 or 0 in frames.shape:
        msg = f"expected frames of shape [T, H, W, C], none of them 0, got {frames.shape}"
        raise NoFramesError(msg)
    total = len(frames)
    chosen = np.arange(total)
    if total > max_frames:
        chosen = np.unique(np.linspace(0, total - 1, max_frames).round().astype(int))
    h, w = frames.shape[1], frames.shape[2]
    target = width or min(max(w, 320), 640)
    dpi = 100
    fig = Figure(figsize=(target / dpi, target * h / w / dpi), dpi=dpi)
    ax = fig.add_axes((0.0, 0.0, 1.0, 1.0))
    ax.set_axis_off()
    gray = frames.shape[3] == 1
    first = frames[chosen[0]]
    image = ax.imshow(
        first[..., 0] if gray else first,
        cmap="gray" if gray else None,
        vmin=0,
        vmax=255,
        interpolation="nearest",
    )
    text = ax.text(
        0.01,
        0.99,
        "",
        transform=ax.transAxes,
        va="top",
        fontsize=9,
        color="white",
        bbox={"facecolor": "black", "alpha": 0.5, "pad": 2, "linewidth": 0},
    )

    def draw(j: int) -> tuple[Any, ...]:
        t = int(chosen[j])
        frame = frames[t]
        image.set_data(frame[..., 0] if gray else frame)
        text.set_text(labels[t] if labels is not None else f"step {t} / {total - 1}")
        return image, text

    anim = animation.FuncAnimation(
        fig, draw, frames=len(chosen), interval=1000.0 / fps, blit=False, repeat=False
    )
    # (at the interval's rate, 1000 / interval: not rounded to a whole number as fps= is)
    html_text = _offline_buttons(anim.to_jshtml(default_mode="once"))
    return Animation(html_text, len(chosen))
