"""The browser viewer, tested in a real headless Chromium driven by Playwright.

The page reads the recordings itself (FORMAT.md in JavaScript); these tests compare what it
shows with what Python reads from the same files: episode counts, lengths, returns, plotted
values, and the pixels of image frames read back from the canvas.

Needs the ``playwright`` Python package and Debian's ``chromium`` at /usr/bin/chromium (never
``playwright install``). Without them the tests skip, unless ``GYM_RECORDING_REQUIRE_ALL`` is set
(as in CI), where they fail. Screenshots go to ``$GYM_RECORDING_ARTIFACTS`` (else ``tmp_path``).
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import importlib.util
import json
import math
import os
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import pytest

from gym_recording import TraceFormatError, TraceRecording, load
from gym_recording.tools.viewer import make_server

ROOT = Path(__file__).resolve().parents[1]
COMPAT_DIR = ROOT / "tests" / "data" / "compat"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
TIMEOUT_MS = 15_000


def _missing(reason: str) -> None:
    """Skip, or fail where every test must run (CI sets GYM_RECORDING_REQUIRE_ALL)."""
    if os.environ.get("GYM_RECORDING_REQUIRE_ALL"):
        pytest.fail(f"{reason} (GYM_RECORDING_REQUIRE_ALL is set)")
    pytest.skip(reason)


# ------------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """One headless Chromium for the whole session."""
    if importlib.util.find_spec("playwright") is None:
        _missing("the playwright package is not installed (pip install playwright)")
    if not CHROMIUM.exists():
        _missing(f"{CHROMIUM} is missing (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    manager = sync_playwright().start()
    try:
        chromium = manager.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        yield chromium
        chromium.close()
    finally:
        manager.stop()


@pytest.fixture
def artifacts(tmp_path: Path) -> Path:
    """Where screenshots go: $GYM_RECORDING_ARTIFACTS, else the test's tmp_path."""
    where = os.environ.get("GYM_RECORDING_ARTIFACTS")
    path = Path(where) if where else tmp_path
    path.mkdir(parents=True, exist_ok=True)
    return path


class Viewer:
    """A viewer page opened on a served directory, with helpers that read what it shows."""

    def __init__(self, page: Any, url: str) -> None:
        self.page = page
        self.url = url
        self.console_errors: list[str] = []
        page.on("pageerror", lambda exc: self.console_errors.append(str(exc)))
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(url)
        page.wait_for_function("Number(document.body.dataset.polls || 0) >= 1")

    def count(self) -> int:
        return int(self.page.inner_text("[data-testid=episode-count]"))

    def wait_count(self, n: int) -> None:
        self.page.wait_for_function(
            "n => document.querySelector('[data-testid=episode-count]').textContent === String(n)",
            arg=n,
        )

    def rows(self) -> list[dict[str, str]]:
        """The rows' data attributes, in the order shown."""
        rows: list[dict[str, str]] = self.page.eval_on_selector_all(
            "[data-testid=episode-row]", "rows => rows.map(r => ({...r.dataset}))"
        )
        return rows

    def select(self, index: int) -> None:
        """Click the row of episode ``index`` and wait until its detail is drawn."""
        self.page.click(f"[data-testid=episode-row][data-index='{index}']")
        self.wait_detail(index)

    def wait_detail(self, index: int) -> None:
        self.page.wait_for_selector(
            f"[data-testid=episode-detail][data-episode='{index}'][data-status=ready]"
        )

    def set_step(self, step: int) -> None:
        self.page.eval_on_selector(
            "[data-testid=step-slider]",
            """(el, v) => {
                el.value = String(v);
                el.dispatchEvent(new Event('input', {bubbles: true}));
            }""",
            step,
        )
        self.wait_step(step)

    def wait_step(self, step: int) -> None:
        self.page.wait_for_selector(f"[data-testid=episode-detail][data-step='{step}']")

    def frame(self, name: str | None = None, step: int | None = None) -> np.ndarray:
        """The RGBA pixels of a frame canvas (as drawn for ``step``), as uint8 [H, W, 4]."""
        selector = "[data-testid=frame-canvas]"
        if name is not None:
            selector += f"[data-name='{name}']"
        if step is not None:
            selector += f"[data-step='{step}']"
        self.page.wait_for_selector(selector)
        got = self.page.eval_on_selector(
            selector,
            """c => {
                const pixels = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
                // (base64: a list of a million numbers crosses the protocol slowly)
                let text = '';
                for (let i = 0; i < pixels.length; i += 0x8000) {
                    text += String.fromCharCode.apply(null, pixels.subarray(i, i + 0x8000));
                }
                return {w: c.width, h: c.height, px: btoa(text)};
            }""",
        )
        pixels = np.frombuffer(base64.b64decode(got["px"]), dtype=np.uint8)
        return pixels.reshape(got["h"], got["w"], 4)

    def text(self, name: str) -> str:
        """What the text track of the field ``name`` shows at the current step."""
        selector = f"[data-testid=text-track][data-name={name}] code"
        return str(self.page.eval_on_selector(selector, "e => e.textContent"))

    def components(self) -> dict[str, str]:
        """Each plotted component's value at the current step (data-value), by name."""
        values: dict[str, str] = self.page.eval_on_selector_all(
            "[data-testid=component-plot]",
            "els => Object.fromEntries(els.map(e => [e.dataset.name, e.dataset.value]))",
        )
        return values

    def reward_points(self) -> int:
        return int(self.page.get_attribute("[data-testid=reward-plot]", "data-points") or -1)

    def facts(self) -> str:
        """The selected episode's facts line (writer, steps, return, seed, ...)."""
        return str(self.page.locator("#detail .facts").inner_text())

    def error_text(self) -> str:
        locator = self.page.locator("[data-testid=error]")
        locator.wait_for(state="visible")
        return str(locator.inner_text())

    def error_visible(self) -> bool:
        return bool(self.page.locator("[data-testid=error]").is_visible())

    def screenshot(self, path: Path) -> None:
        self.page.screenshot(path=str(path), full_page=True)
        assert path.stat().st_size > 1000


@pytest.fixture
def open_viewer(browser: Any) -> Iterator[Callable[[Path], Viewer]]:
    """Serve a directory with make_server (in a thread) and open the page on it."""
    servers: list[Any] = []
    contexts: list[Any] = []
    viewers: list[Viewer] = []

    def open_(directory: Path) -> Viewer:
        server, url = make_server(str(directory))
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
        servers.append(server)
        # Playwright's wait_for_function evaluates strings, which the page's CSP forbids;
        # test_page_works_under_its_content_security_policy runs the page with the CSP on.
        context = browser.new_context(viewport={"width": 1400, "height": 1000}, bypass_csp=True)
        contexts.append(context)
        viewer = Viewer(context.new_page(), url)
        viewers.append(viewer)
        return viewer

    yield open_
    for context in contexts:
        context.close()
    for server in servers:
        server.shutdown()
        server.server_close()
    for viewer in viewers:
        assert viewer.console_errors == [], viewer.console_errors


def _one_episode_shown(open_viewer: Callable[[Path], Viewer], directory: Path) -> Viewer:
    """The viewer of a recording of one episode, that episode shown, and no error."""
    viewer = open_viewer(directory)
    viewer.wait_count(1)
    viewer.wait_detail(0)
    assert not viewer.error_visible()
    return viewer


def compat_case(name: str) -> Path:
    path = COMPAT_DIR / name
    if not path.is_dir():
        pytest.skip(f"the compat recording {path} is missing")
    return path


def copy_case(name: str, tmp_path: Path) -> Path:
    dest = tmp_path / name
    shutil.copytree(compat_case(name), dest)
    return dest


def read_ref(directory: Path, ref: dict[str, Any]) -> np.ndarray:
    """Read an ndarray reference straight from its blob, as FORMAT.md §6.1 describes it."""
    data = (directory / ref["npyfile"]).read_bytes()[ref["npyoff"] : ref["npyoff"] + ref["size"]]
    return np.frombuffer(data, dtype=np.dtype(ref["dtype"]).newbyteorder("<")).reshape(ref["shape"])


def assert_value(shown: str, expected: float) -> None:
    """A data-value string (JavaScript's String(number)) equals a Python number exactly."""
    got = float(shown)
    if math.isnan(expected):
        assert math.isnan(got), (shown, expected)
    else:
        assert got == expected, (shown, expected)


# ------------------------------------------------------------------------------ compat cases


@pytest.mark.parametrize("compressed", [False, True], ids=["raw", "zstd"])
def test_page_works_under_its_content_security_policy(
    browser: Any, tmp_path: Path, compressed: bool
) -> None:
    """With the server's CSP enforced, the page loads, reads and draws without violations;
    compressed, it also compiles xxhash-wasm's WebAssembly to check the frames' checksums."""
    from gym_recording.tools.recode import recode

    directory = compat_case("image")
    if compressed:
        directory = Path(recode(directory, tmp_path / "zstd", compression="zstd"))
    server, url = make_server(str(directory))
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    context = browser.new_context()
    messages: list[str] = []
    try:
        page = context.new_page()
        page.on("console", lambda msg: messages.append(f"{msg.type}: {msg.text}"))
        page.on("pageerror", lambda exc: messages.append(f"pageerror: {exc}"))
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(url)
        page.wait_for_selector("[data-testid=episode-detail][data-status=ready]")
        page.wait_for_selector("[data-testid=frame-canvas][data-step='0']")
        assert page.inner_text("[data-testid=episode-count]") == "5"
        assert len(page.query_selector_all("[data-testid=episode-row]")) == 5
    finally:
        context.close()
        server.shutdown()
        server.server_close()
    assert [m for m in messages if "error" in m.lower() or "violat" in m.lower()] == []


def expected_rows(case: str) -> list[list[tuple[int, float]]]:
    """Per writer, the (length, return) of its episodes in order, from <case>.expected.json."""
    expected = json.loads((COMPAT_DIR / f"{case}.expected.json").read_text())
    per_writer: dict[int, list[tuple[int, float]]] = {}
    for ep in expected["episodes_in_writer_order"]:
        per_writer.setdefault(ep["writer"], []).append((ep["steps"], sum(ep["rewards"])))
    return sorted(per_writer.values())


@pytest.mark.parametrize(
    "case", ["cartpole", "image", "discrete", "tuple", "multiwriter", "empty_episode"]
)
def test_episode_table_matches_the_compat_recording(
    open_viewer: Callable[[Path], Viewer], case: str
) -> None:
    """Episode count, and each episode's length and return, per writer and in order."""
    viewer = open_viewer(compat_case(case))
    expected = expected_rows(case)
    viewer.wait_count(sum(len(w) for w in expected))
    rows = sorted(viewer.rows(), key=lambda r: int(r["index"]))
    per_writer: dict[str, list[tuple[int, float]]] = {}
    for row in rows:
        per_writer.setdefault(row["writer"], []).append((int(row["length"]), float(row["return"])))
    got = sorted(per_writer.values())
    assert [[n for n, _ in w] for w in got] == [[n for n, _ in w] for w in expected]
    for got_writer, want_writer in zip(got, expected, strict=True):
        for (_, got_return), (_, want_return) in zip(got_writer, want_writer, strict=True):
            assert got_return == pytest.approx(want_return, rel=1e-12, abs=1e-12)
    assert not viewer.error_visible()


def test_image_frames_show_the_recorded_pixels(
    open_viewer: Callable[[Path], Viewer], artifacts: Path
) -> None:
    """getImageData on the frame canvas returns the RGB bytes stored in the .bin (version 1)."""
    directory = compat_case("image")
    viewer = open_viewer(directory)
    viewer.wait_count(5)
    manifest = json.loads((directory / "openaigym.trace.1.4287.manifest.json").read_text())
    for batch in manifest["batches"]:
        episodes = json.loads((directory / batch["fn"]).read_text())["episodes"]
        for k in (0, len(episodes) - 1):
            index = batch["first"] + k
            refs = episodes[k]["observations"]  # version 1: a list of per-step ndarray refs
            viewer.select(index)
            assert viewer.reward_points() == len(refs) - 1
            for step in sorted({0, 1, len(refs) // 2, len(refs) - 1}):
                viewer.set_step(step)
                want = read_ref(directory, refs[step])
                assert want.shape == (24, 32, 3)
                got = viewer.frame(step=step)
                assert got.shape == (24, 32, 4)
                np.testing.assert_array_equal(got[:, :, :3], want)
                assert (got[:, :, 3] == 255).all()
    viewer.screenshot(artifacts / "viewer-image-compat.png")


def test_keyboard_steps_and_plays(open_viewer: Callable[[Path], Viewer]) -> None:
    """Arrows step, space plays to the end and stops, Home/End jump, up/down change episode."""
    directory = compat_case("image")
    viewer = open_viewer(directory)
    viewer.wait_count(5)
    viewer.select(0)
    page = viewer.page
    refs = json.loads((directory / "openaigym.trace.1.4287.ep000000000.json").read_text())[
        "episodes"
    ][0]["observations"]
    steps = len(refs) - 1
    page.keyboard.press("ArrowRight")
    viewer.wait_step(1)
    page.keyboard.press("ArrowRight")
    viewer.wait_step(2)
    np.testing.assert_array_equal(viewer.frame(step=2)[:, :, :3], read_ref(directory, refs[2]))
    page.keyboard.press("ArrowLeft")
    viewer.wait_step(1)
    assert page.get_attribute("[data-testid=step-slider]", "max") == str(steps)
    assert page.eval_on_selector("[data-testid=step-slider]", "el => el.value") == "1"
    page.keyboard.press("End")
    viewer.wait_step(steps)
    page.keyboard.press("Home")
    viewer.wait_step(0)
    page.keyboard.press(" ")  # play: runs to the last step, then stops by itself
    viewer.wait_step(steps)
    np.testing.assert_array_equal(
        viewer.frame(step=steps)[:, :, :3], read_ref(directory, refs[steps])
    )
    page.wait_for_selector("#play[aria-label=play]")
    page.keyboard.press(" ")  # play again from the end restarts at 0 ...
    page.keyboard.press(" ")  # ... and pauses
    page.wait_for_selector("#play[aria-label=play]")
    page.keyboard.press("ArrowDown")
    viewer.wait_detail(1)
    page.keyboard.press("ArrowUp")
    viewer.wait_detail(0)


def test_reward_plot_has_one_point_per_step(open_viewer: Callable[[Path], Viewer]) -> None:
    """data-points of the reward plot equals the episode's length, zero-step episode included."""
    for case in ("cartpole", "empty_episode"):
        viewer = open_viewer(compat_case(case))
        expected = expected_rows(case)
        viewer.wait_count(sum(len(w) for w in expected))
        for row in viewer.rows():
            viewer.select(int(row["index"]))
            assert viewer.reward_points() == int(row["length"])
            rewards = viewer.page.eval_on_selector(
                "[data-testid=reward-plot]", "el => el.querySelectorAll('path.series').length"
            )
            assert rewards == 2  # the rewards and the cumulative return
    lengths = [int(r["length"]) for r in viewer.rows()]
    assert 0 in lengths


def test_the_reward_plot_and_the_step_label_give_the_same_reward(
    open_viewer: Callable[[Path], Viewer], tmp_path: Path
) -> None:
    """At observation s the label shows the reward it arrived with (step s's, rewards[s-1]),
    and so do the plot's readouts, with the return collected so far (the total at the last)."""
    with TraceRecording(tmp_path / "r") as rec:
        rec.add_reset(np.zeros(2))
        for t, r in enumerate([10.0, 20.0, 30.0, 40.0]):
            rec.add_step(0, np.full(2, t + 1.0), r, terminated=t == 3)
    viewer = open_viewer(tmp_path / "r")
    viewer.wait_count(1)
    viewer.select(0)
    readouts = (
        "el => [...el.querySelectorAll('text')].map(t => t.textContent)"
        ".filter(t => t.includes(' @ '))"
    )
    for step, want in ((0, ["0 @ 0"]), (2, ["20 @ 2", "30 @ 2"]), (4, ["40 @ 4", "100 @ 4"])):
        viewer.set_step(step)
        assert viewer.page.eval_on_selector("[data-testid=reward-plot]", readouts) == want
        label = viewer.page.inner_text("#step-label")
        assert label.endswith(f" reward {want[0].split()[0]}") if step else "reward" not in label
    assert viewer.reward_points() == 4


def test_sorting_by_clicking_headers(open_viewer: Callable[[Path], Viewer]) -> None:
    """Clicking a header sorts by it, again reverses, and the header says so (aria-sort)."""
    viewer = open_viewer(compat_case("cartpole"))
    viewer.wait_count(12)
    page = viewer.page

    def column(key: str) -> list[float]:
        return [float(r[key]) for r in viewer.rows()]

    assert column("index") == sorted(column("index"))
    page.click("th[data-sort=length]")
    assert column("length") == sorted(column("length"))
    assert page.get_attribute("th[data-sort=length]", "aria-sort") == "ascending"
    page.click("th[data-sort=length]")
    assert column("length") == sorted(column("length"), reverse=True)
    assert page.get_attribute("th[data-sort=length]", "aria-sort") == "descending"
    page.click("th[data-sort=return]")
    assert column("return") == sorted(column("return"))
    assert page.get_attribute("th[data-sort=length]", "aria-sort") is None
    page.click("th[data-sort=return]")
    assert column("return") == sorted(column("return"), reverse=True)
    page.click("th[data-sort=index]")
    page.click("th[data-sort=index]")
    assert column("index") == sorted(column("index"), reverse=True)
    assert len(viewer.rows()) == 12
    # Arrow down follows the order shown.
    shown = [int(r["index"]) for r in viewer.rows()]
    viewer.select(shown[0])
    page.keyboard.press("ArrowDown")
    viewer.wait_detail(shown[1])


# ------------------------------------------------------------------------------ damaged files


def _edit_json(path: Path, edit: Callable[[Any], None]) -> None:
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))


CARTPOLE_BATCH0 = "openaigym.trace.0.4287.ep000000000.json"
CARTPOLE_MANIFEST = "openaigym.trace.0.4287.manifest.json"


def _ep0(doc: Any) -> Any:
    return doc["episodes"][0]


DAMAGES: dict[str, tuple[str, Callable[[Path], object], str, int]] = {
    # name: (file damaged, how, words the message must hold, episodes still shown)
    "offset past the end": (
        CARTPOLE_BATCH0,
        lambda p: _edit_json(p, lambda d: _ep0(d)["observations"].update(npyoff=10**6)),
        "past the end",
        9,
    ),
    "negative offset": (
        CARTPOLE_BATCH0,
        lambda p: _edit_json(p, lambda d: _ep0(d)["actions"].update(npyoff=-8)),
        "npyoff",
        9,
    ),
    "size mismatch": (
        CARTPOLE_BATCH0,
        lambda p: _edit_json(p, lambda d: _ep0(d)["observations"].update(size=12)),
        "size 12",
        9,
    ),
    "unknown dtype": (
        CARTPOLE_BATCH0,
        lambda p: _edit_json(p, lambda d: _ep0(d)["rewards"].update(dtype="object")),
        "dtype",
        9,
    ),
    "negative shape": (
        CARTPOLE_BATCH0,
        lambda p: _edit_json(p, lambda d: _ep0(d)["observations"].update(shape=[-44, 4])),
        "shape",
        9,
    ),
    "blob outside the directory": (
        CARTPOLE_BATCH0,
        lambda p: _edit_json(p, lambda d: _ep0(d)["rewards"].update(npyfile="../x.bin")),
        "plain file name",
        9,
    ),
    "wrong number of observations": (
        CARTPOLE_BATCH0,
        lambda p: _edit_json(
            p, lambda d: _ep0(d)["observations"].update(shape=[3, 4], size=3 * 4 * 4)
        ),
        "expected N+1 observations",
        9,
    ),
    "truncated blob": (
        "openaigym.trace.0.4287.ep000000000.bin",
        lambda p: p.write_bytes(p.read_bytes()[:100]),
        "past the end",
        9,
    ),
    "batch is not JSON": (
        CARTPOLE_BATCH0,
        lambda p: p.write_text('{"episodes": [ {"observations": '),
        "not valid JSON",
        9,
    ),
    "batch name outside the directory": (
        CARTPOLE_MANIFEST,
        lambda p: _edit_json(p, lambda d: d["batches"][0].update(fn="../../etc/passwd")),
        "plain file name",
        0,
    ),
    "unknown major version": (
        CARTPOLE_MANIFEST,
        lambda p: _edit_json(p, lambda d: d.update(format_version="3.0")),
        "format_version",
        0,
    ),
}


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_damaged_recording_shows_an_error(
    open_viewer: Callable[[Path], Viewer], tmp_path: Path, artifacts: Path, damage: str
) -> None:
    """A broken reference, blob, batch or manifest is named in the error box; the rest shows."""
    file, how, words, still_shown = DAMAGES[damage]
    directory = copy_case("cartpole", tmp_path)
    how(directory / file)
    viewer = open_viewer(directory)
    message = viewer.error_text()
    manifest_level = file == CARTPOLE_MANIFEST
    assert (CARTPOLE_MANIFEST if manifest_level else CARTPOLE_BATCH0) in message
    assert words in message
    viewer.wait_count(still_shown)
    if damage == "offset past the end":
        viewer.screenshot(artifacts / "viewer-damaged.png")


HOSTILE_DIR = ROOT / "tests" / "hostile"
#: Hostile cases the page finds as it shows the episode (its blob read), not as it lists the
#: episodes from the JSON: test_a_part_that_does_not_repeat_the_last_observation_is_refused.
SHOWN_CASES = {"part-not-a-copy"}
HOSTILE_CASES = (
    sorted(
        p.name
        for p in HOSTILE_DIR.iterdir()
        if p.is_dir() and not p.name.startswith(("_", ".")) and p.name not in SHOWN_CASES
    )
    if HOSTILE_DIR.is_dir()
    else []
)


@pytest.fixture(scope="module")
def hostile_viewer(browser: Any) -> Iterator[Callable[[str], tuple[str, int]]]:
    """Open hostile cases in one browser context; returns the error text and episode count."""
    context = browser.new_context(bypass_csp=True)
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page_errors: list[str] = []
    page.on("pageerror", lambda exc: page_errors.append(str(exc)))

    def open_case(case: str) -> tuple[str, int]:
        server, url = make_server(str(HOSTILE_DIR / case))
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
        try:
            page.goto(url)
            page.wait_for_function("Number(document.body.dataset.polls || 0) >= 1")
            page.locator("[data-testid=error]").wait_for(state="visible")
            detail = page.get_attribute("[data-testid=episode-detail]", "data-status")
            if detail == "loading":  # let the selected episode finish: it must not crash
                page.wait_for_selector("[data-testid=episode-detail]:not([data-status=loading])")
            text = str(page.inner_text("[data-testid=error]"))
            count = int(page.inner_text("[data-testid=episode-count]"))
        finally:
            page.goto("about:blank")
            server.shutdown()
            server.server_close()
        assert page_errors == [], page_errors
        return text, count

    yield open_case
    context.close()


@pytest.mark.skipif(not HOSTILE_CASES, reason="tests/hostile holds no cases")
@pytest.mark.parametrize("case", HOSTILE_CASES)
def test_hostile_recording_shows_an_error(
    hostile_viewer: Callable[[str], tuple[str, int]], case: str
) -> None:
    """Every recording the Python reader refuses (tests/hostile) shows the page's error box."""
    text, _ = hostile_viewer(case)
    assert "openaigym.trace." in text  # the message names a file of the recording


def _read_before_the_error(directory: Path) -> int:
    """The episodes the Python reader hands out before it refuses the recording."""
    read = 0
    with contextlib.suppress(TraceFormatError), load(directory) as rec:
        for _ in rec:
            read += 1
    return read


PART_CASES = [c for c in HOSTILE_CASES if c.startswith("part")]


@pytest.mark.parametrize("case", PART_CASES)
def test_parts_that_do_not_join_are_no_episode_of_the_list(
    hostile_viewer: Callable[[str], tuple[str, int]], case: str
) -> None:
    """A part with no part before it, or parts that do not join, are an error, not an episode
    of the table (a fragment was listed as a whole episode, with its own length and return):
    the table holds the episodes the Python reader reads."""
    text, count = hostile_viewer(case)
    assert "openaigym.trace." in text
    # (part-without-start: the Python reader refuses the batch whose first episode is the
    # fragment; the viewer lists the whole episode after it, as it shows what it can read)
    whole_after = 1 if case == "part-without-start" else 0
    assert count == _read_before_the_error(HOSTILE_DIR / case) + whole_after


def test_a_part_that_does_not_repeat_the_last_observation_is_refused(
    open_viewer: Callable[[Path], Viewer],
) -> None:
    """FORMAT.md §4: a later part begins with a copy of the observation the part before ends
    with; the page dropped the one it holds unseen. It says so as it shows the episode."""
    viewer = open_viewer(HOSTILE_DIR / "part-not-a-copy")
    viewer.wait_count(2)
    viewer.page.click("[data-testid=episode-row][data-index='1']")
    assert "does not begin with the observation the part before ends with" in viewer.error_text()


# ------------------------------------------------------------------------------ live recording


def test_new_batches_appear_while_recording(
    open_viewer: Callable[[Path], Viewer], tmp_path: Path
) -> None:
    """The page polls the manifests and shows batches listed after it was opened."""
    directory = copy_case("cartpole", tmp_path)
    manifest = directory / CARTPOLE_MANIFEST
    full = manifest.read_text()
    doc = json.loads(full)
    doc["batches"] = doc["batches"][:1]
    manifest.write_text(json.dumps(doc))
    viewer = open_viewer(directory)
    viewer.wait_count(3)
    temporary = directory / ".gymrec-tmp-manifest"
    temporary.write_text(full)
    temporary.replace(manifest)  # atomic, as writers do
    viewer.wait_count(12)
    assert not viewer.error_visible()


# ------------------------------------------------------------------------------ version 2 files


def _encode(value: Any, blob: bytearray, npyfile: str, align: int) -> Any:
    """Encode a field or value as FORMAT.md §5/§6 JSON, appending arrays to ``blob``."""
    if isinstance(value, np.ndarray):
        while len(blob) % align:
            blob.append(0)
        offset = len(blob)
        array = np.ascontiguousarray(value, dtype=value.dtype.newbyteorder("<"))
        blob.extend(array.tobytes())
        return {
            "__type": "ndarray",
            "shape": list(value.shape),
            "order": "C",
            "dtype": value.dtype.name,
            "npyfile": npyfile,
            "npyoff": offset,
            "size": array.nbytes,
        }
    if isinstance(value, dict):
        return {
            "__type": "dict",
            "fields": {k: _encode(v, blob, npyfile, align) for k, v in value.items()},
        }
    if isinstance(value, tuple):
        return {"__type": "tuple", "fields": [_encode(v, blob, npyfile, align) for v in value]}
    if isinstance(value, list):  # (per-step values: an array among them is a reference, §6.1)
        return [_encode(v, blob, npyfile, align) if isinstance(v, np.ndarray) else v for v in value]
    return value


def write_recording(
    directory: Path,
    writer: str,
    batches: list[list[dict[str, Any]]],
    *,
    version: str | None = "2.0",
    align: int = 8,
    lead: int = 0,
) -> None:
    """Write one writer's batches by hand, following FORMAT.md (a test oracle, not the library).

    Each episode is a dict with ``observations``, ``actions``, ``rewards`` (arrays, dicts, tuples
    or lists) and any other episode keys (``terminated``, ``continues``, ``part`` ...).
    ``align``/``lead`` place arrays off the 8-byte grid (which readers refuse, FORMAT.md §6.1).
    """
    directory.mkdir(parents=True, exist_ok=True)
    entries = []
    first = 0
    for episodes in batches:
        stem = f"openaigym.trace.{writer}.ep{first:09d}"
        blob = bytearray(lead)
        objects = []
        for ep in episodes:
            obj = {k: _encode(v, blob, f"{stem}.bin", align) for k, v in ep.items()}
            objects.append(obj)
        (directory / f"{stem}.bin").write_bytes(bytes(blob))
        (directory / f"{stem}.json").write_text(json.dumps({"episodes": objects}))
        entry: dict[str, Any] = {"first": first, "len": len(episodes), "fn": f"{stem}.json"}
        if version is not None:
            entry.update(bin=f"{stem}.bin", continues=bool(episodes[-1].get("continues")))
        entries.append(entry)
        first += len(episodes)
    manifest: dict[str, Any] = {"batches": entries}
    if version is not None:
        manifest.update(
            format="gym-recording",
            format_version=version,
            writer=writer,
            created="2024-01-01T00:00:00Z",
            env_id="Synthetic-v0",
        )
    temporary = directory / f".gymrec-tmp-{writer}"
    temporary.write_text(json.dumps(manifest))
    temporary.replace(directory / f"openaigym.trace.{writer}.manifest.json")  # atomic (§2)


def all_dtypes_observations() -> dict[str, np.ndarray]:
    """Four steps of one component per dtype, with edge values, plus small images."""
    rng = np.random.default_rng(3)
    return {
        "b": np.array([[True, False], [False, True], [True, True], [False, False]]),
        "i8": np.array([-128, -1, 0, 127], np.int8),
        "i16": np.array([-32768, -2, 3, 32767], np.int16),
        "i32": np.array([-(2**31), -5, 6, 2**31 - 1], np.int32),
        "i64": np.array([-(2**53) + 1, -7, 2**40 + 3, 2**53 - 1], np.int64),
        "u8": np.array([0, 1, 200, 255], np.uint8),
        "u16": np.array([0, 65535, 7, 8], np.uint16),
        "u32": np.array([0, 2**32 - 1, 9, 10], np.uint32),
        "u64": np.array([0, 2**53, 2**63, 12], np.uint64),
        "f16": np.array([1.5, -(2**-14), 65504.0, 2**-24], np.float16),
        "f32": np.array([0.1, -3.5, 1e30, np.nan], np.float32),
        "f64": np.array([0.1, -1e-300, 1e300, np.inf], np.float64),
        "c64": np.array([1 + 2j, -3.5 - 0.25j, 0, 1j], np.complex64),
        "c128": np.array([0.1 + 0.2j, -1j, 3, -np.inf], np.complex128),
        "grid": rng.normal(size=(4, 2, 3)).astype(np.float32),
        "gray": rng.integers(0, 256, size=(4, 18, 16), dtype=np.uint8),
        "mono": rng.integers(0, 256, size=(4, 17, 16, 1), dtype=np.uint8),
        "rgba": rng.integers(0, 256, size=(4, 16, 18, 4), dtype=np.uint8),
    }


def expected_components(name: str, array: np.ndarray, step: int) -> dict[str, float]:
    """What the page should show for ``array[step]``: one value per component label."""
    row = np.asarray(array[step])
    out: dict[str, float] = {}
    for index in np.ndindex(row.shape):
        label = name if not index else f"{name}[{','.join(map(str, index))}]"
        value = row[index]
        if np.iscomplexobj(value):
            out[f"{label}.re"] = float(value.real)
            out[f"{label}.im"] = float(value.imag)
        else:
            out[label] = float(value)
    return out


def test_all_dtypes_dicts_tuples_and_images_of_version_2(
    open_viewer: Callable[[Path], Viewer], tmp_path: Path, artifacts: Path
) -> None:
    """Every §6.1 dtype decodes to the stored values; Dict/Tuple leaves plot; images draw."""
    obs = all_dtypes_observations()
    actions = (np.array([0, 2, 1], np.int64), np.arange(6, dtype=np.float32).reshape(3, 2) / 7)
    rewards = np.array([1.0, -0.25, 2.5])
    write_recording(
        tmp_path / "rec",
        "0.100.abc",
        [
            [
                {
                    "observations": obs,
                    "actions": actions,
                    "rewards": rewards,
                    "terminated": True,
                    "seed": 7,
                },
                {
                    "observations": {k: v[:2] for k, v in obs.items()},
                    "actions": tuple(a[:1] for a in actions),
                    "rewards": rewards[:1],
                    "truncated": True,
                },
            ]
        ],
    )
    viewer = open_viewer(tmp_path / "rec")
    viewer.wait_count(2)
    rows = viewer.rows()
    assert [(r["length"], r["terminated"], r["truncated"]) for r in rows] == [
        ("3", "true", "false"),
        ("1", "false", "true"),
    ]
    assert float(rows[0]["return"]) == rewards.sum()
    viewer.select(0)
    for step in range(4):
        viewer.set_step(step)
        shown = viewer.components()
        for key, array in obs.items():
            if key in ("gray", "mono", "rgba"):
                continue
            for label, value in expected_components(f"obs.{key}", array, step).items():
                assert label in shown, (label, sorted(shown))
                assert_value(shown[label], value)
        if step < 3:
            assert_value(shown["action[0]"], float(actions[0][step]))
            assert_value(shown["action[1][1]"], float(actions[1][step, 1]))
        else:
            assert shown["action[0]"] == ""
        gray = viewer.frame("obs.gray", step)
        assert gray.shape == (18, 16, 4)
        for channel in range(3):
            np.testing.assert_array_equal(gray[:, :, channel], obs["gray"][step])
        mono = viewer.frame("obs.mono", step)
        np.testing.assert_array_equal(mono[:, :, 0], obs["mono"][step][:, :, 0])
        rgba = viewer.frame("obs.rgba", step)
        np.testing.assert_array_equal(rgba[:, :, :3], obs["rgba"][step][:, :, :3])
    assert viewer.reward_points() == 3
    assert len(viewer.page.query_selector_all("[data-testid=frame-canvas]")) == 3
    viewer.screenshot(artifacts / "viewer-dtypes.png")


def test_constant_values_past_two_to_the_53_are_plotted(
    open_viewer: Callable[[Path], Viewer], tmp_path: Path
) -> None:
    """A value that stays at 2**62 (or 1e20) has a plot: its range is padded by more than the
    1 that such a number cannot tell from itself (every coordinate was NaN)."""
    with TraceRecording(tmp_path / "rec") as rec:
        rec.add_reset(np.full(2, 1e20))
        for _ in range(3):
            rec.add_step(np.int64(2**62), np.full(2, 1e20), 1.0)
        rec.end_episode()
    viewer = open_viewer(tmp_path / "rec")
    viewer.wait_count(1)
    viewer.select(0)
    paths = viewer.page.eval_on_selector_all("path", "els => els.map(e => e.getAttribute('d'))")
    assert paths and not [d for d in paths if d is None or "NaN" in d], paths
    assert viewer.console_errors == []


def test_version_1_quirks_nan_tokens_and_unaligned_offsets(
    open_viewer: Callable[[Path], Viewer], tmp_path: Path
) -> None:
    """NaN/Infinity tokens of version 1 are read; an array off the 8-byte grid is refused, as
    load() refuses it (FORMAT.md §6.1: the original writer aligned every array)."""
    episode = {"observations": np.ones((2, 2)), "actions": np.ones(1), "rewards": np.ones(1)}
    write_recording(tmp_path / "odd", "0.98", [[episode]], version=None, align=1, lead=3)
    viewer = open_viewer(tmp_path / "odd")
    viewer.page.wait_for_function("Number(document.body.dataset.polls || 0) >= 1")
    assert viewer.count() == 0 and viewer.error_visible()
    with pytest.raises(TraceFormatError, match="not a multiple of 8"), load(tmp_path / "odd") as r:
        list(r)
    directory = tmp_path / "rec"
    obs = np.array([[0.5, -1.25], [2.0, 3.5], [np.pi, -np.e]])
    actions = np.array([-(2**40), 3], np.int64)
    rewards = np.array([0.125, -2.0])
    write_recording(
        directory,
        "0.99",
        [[{"observations": obs, "actions": actions, "rewards": rewards}]],
        version=None,
    )
    # A second writer with a JSON-list observation holding NaN/Infinity tokens (version 1 style).
    write_recording(
        directory,
        "1.99",
        [[{"observations": [], "actions": np.array([1, 0]), "rewards": np.array([1.0, 1.0])}]],
        version=None,
    )
    batch_path = directory / "openaigym.trace.1.99.ep000000000.json"
    text = batch_path.read_text().replace(
        '"observations": []', '"observations": [[1.0, NaN], [2.0, Infinity], [3.0, -Infinity]]'
    )
    batch_path.write_text(text)
    viewer = open_viewer(directory)
    viewer.wait_count(2)
    assert not viewer.error_visible()
    viewer.select(0)
    for step in range(3):
        viewer.set_step(step)
        shown = viewer.components()
        assert_value(shown["obs[0]"], obs[step, 0])
        assert_value(shown["obs[1]"], obs[step, 1])
        if step < 2:
            assert_value(shown["action"], float(actions[step]))
    viewer.select(1)
    specials = [math.nan, math.inf, -math.inf]
    for step in range(3):
        viewer.set_step(step)
        shown = viewer.components()
        assert_value(shown["obs[0]"], step + 1.0)
        assert_value(shown["obs[1]"], specials[step])


def test_episode_parts_are_joined(open_viewer: Callable[[Path], Viewer], tmp_path: Path) -> None:
    """An episode split over batches (continues/part) shows as one; the repeated obs is dropped."""
    full_obs = np.arange(8 * 2, dtype=np.float32).reshape(8, 2)
    rewards = np.arange(7, dtype=np.float64) / 4
    actions = np.arange(7, dtype=np.int64)

    def part(a: int, b: int, k: int, continues: bool) -> dict[str, Any]:
        return {
            "observations": full_obs[a : b + 1],
            "actions": actions[a:b],
            "rewards": rewards[a:b],
            "part": k,
            "continues": continues,
            "terminated": not continues,
        }

    directory = tmp_path / "rec"
    short = {
        "observations": full_obs[:2],
        "actions": actions[:1],
        "rewards": rewards[:1],
    }
    # Batch 1 ends with part 0 of the long episode, batch 2 holds part 1, batch 3 parts 2.
    write_recording(
        directory,
        "0.1.xyz",
        [[short, part(0, 2, 0, True)], [part(2, 5, 1, True)], [part(5, 7, 2, False), short]],
    )
    viewer = open_viewer(directory)
    viewer.wait_count(3)
    rows = viewer.rows()
    assert [int(r["length"]) for r in rows] == [1, 7, 1]
    assert float(rows[1]["return"]) == rewards.sum()
    assert rows[1]["terminated"] == "true"
    viewer.select(1)
    assert viewer.reward_points() == 7
    assert viewer.page.get_attribute("[data-testid=step-slider]", "max") == "7"
    for step in range(8):
        viewer.set_step(step)
        shown = viewer.components()
        assert_value(shown["obs[0]"], float(full_obs[step, 0]))
        assert_value(shown["obs[1]"], float(full_obs[step, 1]))
        if step < 7:
            assert_value(shown["action"], float(actions[step]))


def test_unfinished_episode_is_hidden_until_its_last_part(
    open_viewer: Callable[[Path], Viewer], tmp_path: Path
) -> None:
    """Like the Python reader, an episode whose last part is not written yet is not listed."""
    directory = tmp_path / "rec"
    obs = np.zeros((4, 1), np.float32)
    done = {"observations": obs, "actions": np.zeros(3, np.int64), "rewards": np.ones(3)}
    started = {**done, "continues": True}
    write_recording(directory, "0.1.live", [[done, started]])
    viewer = open_viewer(directory)
    viewer.wait_count(1)
    assert "being recorded" in viewer.page.inner_text("#status")
    write_recording(directory, "0.1.live", [[done, started], [{**done, "part": 1}]])
    viewer.wait_count(2)
    assert [r["length"] for r in viewer.rows()] == ["3", "6"]


# ------------------------------------------------------------------------------ real recordings


def _wrapper() -> Any:
    """The library's recording wrapper, or a skip if it is not there yet."""
    try:
        from gym_recording.wrappers import TraceRecordingWrapper
    except ImportError as exc:
        pytest.skip(f"gym_recording.wrappers.TraceRecordingWrapper is not available: {exc}")
    return TraceRecordingWrapper


def _assert_page_matches_reader(viewer: Viewer, directory: Path) -> list[Any]:
    """The page's episode count and every row's numbers equal gym_recording.load's."""
    import gym_recording

    with gym_recording.load(str(directory)) as rec:
        episodes = list(rec)
    viewer.wait_count(len(episodes))
    rows = sorted(viewer.rows(), key=lambda r: int(r["index"]))
    assert len(rows) == len(episodes)
    for row, ep in zip(rows, episodes, strict=True):
        assert int(row["length"]) == ep.length
        assert float(row["return"]) == pytest.approx(ep.total_reward, rel=1e-12, abs=1e-12)
        assert row["terminated"] == str(bool(ep.terminated)).lower()
        assert row["truncated"] == str(bool(ep.truncated)).lower()
        assert row["writer"] == ep.writer
    return episodes


def test_cartpole_recorded_by_the_library(
    open_viewer: Callable[[Path], Viewer], tmp_path: Path, artifacts: Path
) -> None:
    """A real CartPole recording: the page's numbers equal gym_recording.load's."""
    import gymnasium

    wrapper = _wrapper()
    directory = tmp_path / "rec"
    # Small batches, so that episodes are split into parts across batches.
    env = wrapper(gymnasium.make("CartPole-v1"), str(directory), batch_bytes=500)
    env.action_space.seed(0)
    for episode in range(6):
        env.reset(seed=episode)
        done = False
        while not done:
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            done = terminated or truncated
    env.reset(seed=99)  # an episode cut by close
    for _ in range(3):
        env.step(env.action_space.sample())
    env.close()
    (manifest,) = directory.glob("openaigym.trace.*.manifest.json")
    assert any(b.get("continues") for b in json.loads(manifest.read_text())["batches"])

    viewer = open_viewer(directory)
    episodes = _assert_page_matches_reader(viewer, directory)
    assert viewer.count() == 7
    for ep in (episodes[0], episodes[-1]):
        viewer.select(ep.index)
        assert viewer.reward_points() == ep.length
        # (the keys of a split episode's first part: its seed, and when it started)
        assert ep.started_at is not None
        started = datetime.datetime.fromtimestamp(ep.started_at, datetime.timezone.utc)
        assert f"seed {ep.seed}" in viewer.facts()
        assert f"started {started:%Y-%m-%d %H:%M:%S} UTC" in viewer.facts()
        for step in (0, ep.length // 2, ep.length):
            viewer.set_step(step)
            shown = viewer.components()
            for k in range(4):
                assert_value(shown[f"obs[{k}]"], float(ep.observations[step, k]))
    viewer.select(episodes[0].index)
    viewer.set_step(episodes[0].length // 2)
    assert not viewer.error_visible()
    viewer.screenshot(artifacts / "viewer-cartpole.png")


def test_seeds_past_a_double_show_their_digits_and_long_ints_are_read(
    open_viewer: Callable[[Path], Viewer], tmp_path: Path
) -> None:
    """A seed past 2 ** 53 (a SeedSequence's entropy, say) is shown as recorded, to be
    reused; an int of hundreds of digits in the options (no double holds it, and FORMAT.md
    §9 lets readers refuse only past 4,300) does not hide its batch."""
    seeds = [2**60 + 1, 123456789012345678901234567890123456789]
    with TraceRecording(tmp_path / "r") as rec:
        for seed in seeds:
            rec.add_reset(np.zeros(2), seed=seed, options={"h": 10**400})
            rec.add_step(0, np.ones(2), 1.0, terminated=True)
    viewer = open_viewer(tmp_path / "r")
    viewer.wait_count(2)
    for index, seed in enumerate(seeds):
        viewer.select(index)
        assert f"seed {seed}" in viewer.facts()
    assert not viewer.error_visible()
    assert viewer.console_errors == []


def test_an_episode_whose_later_parts_are_per_step_values_is_listed(
    open_viewer: Callable[[Path], Viewer], tmp_path: Path
) -> None:
    """A part of per-step values joins any other (FORMAT.md §4): the episode is in the
    table, as load() reads it, and shown with no error."""
    with TraceRecording(tmp_path / "r", batch_bytes=2000) as rec:
        rec.add_reset(np.zeros(8))
        for t in range(80):  # (one observation of another shape: per-step values from then)
            rec.add_step(0, np.ones(9 if t == 60 else 8), 1.0, terminated=t == 79)
        rec.add_reset(np.zeros(8))
        rec.add_step(0, np.ones(8), 1.0, terminated=True)
    with load(tmp_path / "r") as got:
        lengths = [str(ep.length) for ep in got]
    assert lengths == ["80", "1"]
    viewer = open_viewer(tmp_path / "r")
    viewer.wait_count(2)
    assert [row["length"] for row in viewer.rows()] == lengths
    viewer.wait_detail(0)
    assert not viewer.error_visible()


def test_per_step_values_laid_out_otherwise_in_each_part_join_as_text(
    open_viewer: Callable[[Path], Viewer], tmp_path: Path
) -> None:
    """Sequence actions of one length in a part (plotted) and of several in the next (text):
    the page called the recording damaged and showed no episode; it shows them as text."""
    space = gymnasium.spaces.Sequence(gymnasium.spaces.Discrete(3))
    actions = [(0, 1)] + [(1,)] * 29 + [tuple(range(t % 3)) for t in range(30, 40)]
    with TraceRecording(tmp_path / "r", action_space=space, batch_bytes=400) as rec:
        rec.add_reset(np.zeros(2, np.float32))
        for t, action in enumerate(actions):
            rec.add_step(action, np.full(2, t, np.float32), 1.0, terminated=t == 39)
    assert len(list((tmp_path / "r").glob("*.ep*.json"))) > 1  # (parts)
    viewer = _one_episode_shown(open_viewer, tmp_path / "r")
    for t in (0, 1, 35):
        viewer.set_step(t)
        shown = viewer.text("action")
        assert shown == f"({', '.join(map(str, actions[t]))})", (t, shown)


class _ShiftingEnv(gymnasium.Env[Any, int]):
    """Observations of two float32s, then from step 25 of three (``wider``) or of two float64s."""

    def __init__(self, change: str) -> None:
        self.observation_space = gymnasium.spaces.Box(-1e3, 1e3, (2,), np.float32)
        self.action_space = gymnasium.spaces.Discrete(2)
        self.change, self.t = change, 0

    def _obs(self) -> np.ndarray:
        later = self.t >= 25
        width = 3 if later and self.change == "wider" else 2
        dtype = np.float64 if later and self.change == "float64" else np.float32
        return (np.arange(width) + self.t / 4).astype(dtype)

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action: int) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        self.t += 1
        return self._obs(), 1.0, self.t == 40, False, {}


def _observation_kinds(directory: Path) -> str:
    """Each episode object's observations in batch order: A (an array) or L (per-step values)."""
    kinds = ""
    for batch in sorted(directory.glob("*.ep*.json")):
        for episode in json.loads(batch.read_text())["episodes"]:
            kinds += "L" if isinstance(episode["observations"], list) else "A"
    return kinds


def _assert_shown_as_loaded(viewer: Viewer, directory: Path) -> None:
    """The page shows the one episode, observations as load() reads them at every step."""
    with load(directory) as rec:
        (episode,) = list(rec)
    viewer.wait_count(1)
    viewer.wait_detail(0)
    assert not viewer.error_visible()
    for t in range(episode.length + 1):
        viewer.set_step(t)
        expected = [float(x) for x in episode.observations[t]]
        if viewer.page.locator("[data-testid=text-track][data-name=obs]").count():
            shown = viewer.text("obs")
            assert [float(x) for x in json.loads(shown)] == expected, (t, shown)
        else:
            components = viewer.components()
            assert [float(components[f"obs[{k}]"]) for k in range(2)] == expected, t


@pytest.mark.parametrize("change", ["wider", "float64"])
def test_an_episode_of_array_parts_then_per_step_value_parts_is_shown(
    open_viewer: Callable[[Path], Viewer], tmp_path: Path, change: str
) -> None:
    """Observations that stop fitting their arrays mid-episode: the recorder stores the later
    parts as per-step values, which load() joins to the arrays before; the page called the
    recording damaged and showed no observations. It shows them as one-part per-step values
    are shown: text when their shapes differ, plotted when only their dtypes do."""
    from gym_recording.wrappers import TraceRecordingWrapper

    directory = tmp_path / "r"
    env = TraceRecordingWrapper(_ShiftingEnv(change), str(directory), batch_bytes=400)
    env.reset(seed=0)
    done = False
    while not done:
        _, _, done, _, _ = env.step(0)
    env.close()
    kinds = _observation_kinds(directory)
    assert kinds.startswith("AL") and kinds.endswith("L"), kinds
    viewer = open_viewer(directory)
    _assert_shown_as_loaded(viewer, directory)
    if change == "wider":
        assert viewer.page.locator("[data-testid=text-track][data-name=obs]").count() == 1
    else:
        assert viewer.page.locator("[data-testid=text-track]").count() == 0


def test_a_dict_field_of_array_parts_then_per_step_value_parts_is_shown(
    open_viewer: Callable[[Path], Viewer], tmp_path: Path
) -> None:
    """A Dict observation one of whose arrays widens mid-episode: the later parts hold per-step
    dicts (their ints as NumPy scalars), joined to the dict of arrays before as per-step values.
    The page called the copy a later part begins with another observation (a scalar's JSON
    against an array's number) and showed nothing; it shows each step's dict as load() reads it."""
    with TraceRecording(tmp_path / "r", batch_bytes=400) as rec:
        rec.add_reset({"pos": np.zeros(2, np.float32), "n": np.int64(0)})
        for t in range(40):
            pos = np.full(3 if t >= 24 else 2, t / 4, np.float32)
            rec.add_step(0, {"pos": pos, "n": np.int64(t)}, 1.0, terminated=t == 39)
    assert _observation_kinds(tmp_path / "r")[:2] == "AL"
    with load(tmp_path / "r") as got:
        (episode,) = list(got)
    viewer = _one_episode_shown(open_viewer, tmp_path / "r")
    for t in (3, 30, 40):
        viewer.set_step(t)
        shown = json.loads(viewer.text("obs"))
        expected = episode.observations[t]
        assert shown == {"pos": expected["pos"].tolist(), "n": int(expected["n"])}, (t, shown)


def test_an_episode_of_per_step_value_parts_then_array_parts_is_shown(
    open_viewer: Callable[[Path], Viewer], tmp_path: Path
) -> None:
    """The reverse order (the library's recorder keeps per-step values once it falls back
    to them; another writer may not): per-step values of three floats and one of two, then
    arrays of two floats. load() reads it; the page shows it, the observations as text."""
    wide = [np.arange(3, dtype=np.float32) + t for t in range(4)]
    narrow = np.arange(2 * 4, dtype=np.float32).reshape(4, 2)
    parts = [
        {"observations": [*wide, narrow[0]], "actions": np.zeros(4, np.int64), "part": 0},
        {"observations": narrow, "actions": np.zeros(3, np.int64), "part": 1},
    ]
    for k, part in enumerate(parts):
        part.update(rewards=np.ones(len(part["actions"])), continues=k == 0, terminated=k == 1)
    write_recording(tmp_path / "r", "0.1.xyz", [[parts[0]], [parts[1]]])
    assert _observation_kinds(tmp_path / "r") == "LA"
    viewer = open_viewer(tmp_path / "r")
    _assert_shown_as_loaded(viewer, tmp_path / "r")


def test_a_link_to_an_episode_past_the_first_poll_opens_it(
    open_viewer: Callable[[Path], Viewer], tmp_path: Path
) -> None:
    """#episode=150 of 200 one-episode batches (64 read a poll) opened episode 0 and
    rewrote the address to #episode=0."""
    with TraceRecording(tmp_path / "r", batch_bytes=1) as rec:
        for e in range(200):
            rec.add_reset(np.float32([e, 0]))
            rec.add_step(0, np.float32([e, 1]), 1.0, terminated=True)
    viewer = open_viewer(tmp_path / "r")
    viewer.page.goto(f"{viewer.url}#episode=150")
    viewer.page.reload()  # (a page opened on the link: the hash alone does not load it again)
    viewer.wait_count(200)
    viewer.wait_detail(150)
    assert viewer.page.evaluate("location.hash") == "#episode=150"


def test_negative_zero_is_shown_as_it_is(
    open_viewer: Callable[[Path], Viewer], tmp_path: Path
) -> None:
    """-0.0 (in observations, actions, rewards) read "0"."""
    with TraceRecording(tmp_path / "r") as rec:
        rec.add_reset(np.array([-0.0, 1.0]))
        rec.add_step(np.float64(-0.0), np.array([-0.0, 2.0]), -0.0, terminated=True)
    viewer = open_viewer(tmp_path / "r")
    viewer.wait_detail(0)
    viewer.set_step(1)
    assert "reward -0" in viewer.page.inner_text("#step-label")
    assert viewer.components()["obs[0]"] == "-0"
    # (in text: NaN inside a list read as its JSON object, -0.0 as 0)
    with TraceRecording(tmp_path / "text") as rec:
        rec.add_reset([float("nan"), -0.0, [1]])
        rec.add_step(0, [float("nan"), -0.0, [1, 2]], 1.0, terminated=True)
    text = open_viewer(tmp_path / "text")
    text.wait_detail(0)
    shown = text.text("obs")
    assert shown == "[nan,-0,[1]]"


def test_long_ints_and_values_shaped_like_episodes_are_shown(
    open_viewer: Callable[[Path], Viewer], tmp_path: Path
) -> None:
    """Per-step values: an int no double holds is shown with its digits, up to FORMAT.md §9's
    4,300 (one more is refused, as load() refuses it); a dict that has an episode's keys
    (and a seed past 2 ** 53) is shown, not a page error."""
    shaped = {"observations": 1, "rewards": 2, "seed": 2**60 + 1}
    with TraceRecording(tmp_path / "r") as rec:
        rec.add_reset("start")  # (per-step values)
        rec.add_step(0, 10**400, 1.0)
        rec.add_step(0, shaped, 1.0, terminated=True)
    viewer = open_viewer(tmp_path / "r")
    viewer.wait_count(1)
    viewer.select(0)
    text = "els => els.map(e => e.querySelector('code').textContent).join(' ')"
    viewer.set_step(1)  # (its first 200 characters)
    shown = viewer.page.eval_on_selector_all("[data-testid=text-track]", text)
    assert "1" + "0" * 190 in shown and "__type" not in shown
    viewer.set_step(2)
    assert f'"seed":{2**60 + 1}' in viewer.page.eval_on_selector_all(
        "[data-testid=text-track]", text
    )
    assert not viewer.error_visible() and viewer.console_errors == []
    for digits, readable in ((4300, True), (4301, False), (-4300, False)):  # (-: a sign more)
        d = tmp_path / f"d{digits}"
        with TraceRecording(d) as rec:
            rec.add_reset(np.zeros(2), options={"h": 10**4299})  # (4,300 digits)
            rec.add_step(0, np.ones(2), 1.0, terminated=True)
        batch = next(d.glob("*.ep*.json"))  # (a writer refuses 4,301 digits: edit the file)
        if not readable:
            longer = "1" + "0" * 4300 if digits > 0 else "-" + "9" * 4300
            text = batch.read_text().replace("1" + "0" * 4299, longer)
            batch.write_text(text)
            manifest = next(d.glob("*.manifest.json"))
            doc = json.loads(manifest.read_text())
            doc["batches"][0]["bytes"] += 1
            manifest.write_text(json.dumps(doc))
        viewer = open_viewer(d)
        viewer.page.wait_for_function("Number(document.body.dataset.polls || 0) >= 1")
        assert viewer.count() == (1 if readable else 0), digits
        assert viewer.error_visible() is not readable


def test_a_damaged_batch_in_the_middle_of_an_episode_leaves_no_episode_being_recorded(
    open_viewer: Callable[[Path], Viewer], tmp_path: Path
) -> None:
    """An episode in parts whose middle batch is damaged: an error, the whole episodes
    listed, and no fragment said to be "being recorded" on a finished recording."""
    d = tmp_path / "r"
    with TraceRecording(d, batch_bytes=2000) as rec:
        rec.add_reset(np.zeros(8))
        for t in range(60):
            rec.add_step(0, np.ones(8), 1.0, terminated=t == 59)
        rec.add_reset(np.zeros(8))
        rec.add_step(0, np.ones(8), 1.0, terminated=True)
    (manifest,) = d.glob("*.manifest.json")
    batches = json.loads(manifest.read_text())["batches"]
    assert batches[0].get("continues") and len(batches) >= 3
    (d / batches[1]["fn"]).write_text("{ damaged")
    viewer = open_viewer(d)
    viewer.page.locator("[data-testid=error]").wait_for(state="visible")
    assert [row["length"] for row in viewer.rows()] == ["1"]
    assert "being recorded" not in viewer.page.inner_text("body")


def test_a_recording_of_many_batches_is_shown_as_they_are_read(
    open_viewer: Callable[[Path], Viewer], tmp_path: Path
) -> None:
    """Batches are read at most 64 a poll, the next poll at once: 200 one-episode batches
    take at least 4 polls, their episodes shown as they come, and then all of them."""
    import gym_recording

    directory = tmp_path / "rec"
    with gym_recording.TraceRecording(directory, batch_bytes=1) as rec:
        for e in range(200):
            rec.add_reset(np.full(2, e, np.float32))
            rec.add_step(0, np.zeros(2, np.float32), 1.0, terminated=True)
            rec.save_complete()
    assert len(list(directory.glob("*.ep*.json"))) == 200
    viewer = open_viewer(directory)
    viewer.wait_count(200)
    assert int(viewer.page.evaluate("document.body.dataset.polls")) >= 4
    _assert_page_matches_reader(viewer, directory)
    assert not viewer.error_visible()


def test_recorded_infos_with_episode_statistics(
    open_viewer: Callable[[Path], Viewer], tmp_path: Path
) -> None:
    """MuJoCo-style numeric infos under RecordEpisodeStatistics, whose last step info adds
    ``"episode"`` beside the info columns (FORMAT.md §4, 2.3): the page reads every episode."""
    import gymnasium

    from tests.conftest import StepCounter

    class Infos(StepCounter):
        def step(self, action: int) -> Any:
            self.t += 1
            info = {"x_velocity": np.float64(self.t / 3), "reward_ctrl": -0.1 * self.t}
            return np.full(2, self.t / 40, np.float32), 1.0, self.t >= 12 + action, False, info

    directory = tmp_path / "rec"
    env = gymnasium.wrappers.RecordEpisodeStatistics(Infos())
    with _wrapper()(env, str(directory), record_infos=True) as w:
        for episode in range(3):
            w.reset(seed=episode)
            done = False
            while not done:
                done = any(w.step(episode % 2)[2:4])
    (batch,) = directory.glob("openaigym.trace.*.ep*.json")
    objects = json.loads(batch.read_text())["episodes"]
    assert all("info_columns" in o and set(o["infos"][-1]) == {"episode"} for o in objects)
    viewer = open_viewer(directory)
    _assert_page_matches_reader(viewer, directory)
    assert viewer.count() == 3
    assert not viewer.error_visible()


def _record_pixels_env(
    directory: Path,
    shape: tuple[int, ...],
    make_obs: Callable[[Any], dict[str, np.ndarray]],
    *,
    length: int,
    seed: int,
    **kwargs: Any,
) -> None:
    """Record 3 episodes of ``length`` steps of a Dict env of an RGB image (``pixels``) and a
    position (``pos``), ``make_obs(env)`` making each observation (``env.t`` is the step)."""
    import gymnasium
    from gymnasium import spaces

    class PixelsEnv(gymnasium.Env[Any, Any]):
        observation_space = spaces.Dict(
            {
                "pixels": spaces.Box(0, 255, shape, np.uint8),
                "pos": spaces.Box(-64.0, 64.0, (2,), np.float32),
            }
        )
        action_space = spaces.Discrete(3)

        def reset(
            self, *, seed: int | None = None, options: dict[str, Any] | None = None
        ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
            super().reset(seed=seed)
            self.t = 0
            return make_obs(self), {}

        def step(self, action: int) -> tuple[dict[str, np.ndarray], float, bool, bool, dict]:
            self.t += 1
            return make_obs(self), float(action) - 1.0, self.t >= length, False, {}

    env = _wrapper()(PixelsEnv(), str(directory), **kwargs)
    env.action_space.seed(seed)
    for episode in range(3):
        env.reset(seed=episode)
        done = False
        while not done:
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            done = terminated or truncated
    env.close()


def test_image_env_recorded_by_the_library(
    open_viewer: Callable[[Path], Viewer], tmp_path: Path, artifacts: Path
) -> None:
    """A Dict observation with an RGB image: the canvas shows load()'s pixels at each step."""
    directory = tmp_path / "rec"
    _record_pixels_env(
        directory,
        (18, 24, 3),
        lambda env: {  # random RGB frames and a position
            "pixels": env.np_random.integers(0, 256, (18, 24, 3), dtype=np.uint8),
            "pos": env.np_random.uniform(-1, 1, 2).astype(np.float32),
        },
        length=9,
        seed=1,
    )

    viewer = open_viewer(directory)
    episodes = _assert_page_matches_reader(viewer, directory)
    ep = episodes[1]
    viewer.select(ep.index)
    for step in range(ep.length + 1):
        viewer.set_step(step)
        got = viewer.frame("obs.pixels", step)
        np.testing.assert_array_equal(got[:, :, :3], ep.observations["pixels"][step])
        shown = viewer.components()
        assert_value(shown["obs.pos[0]"], float(ep.observations["pos"][step, 0]))
    viewer.set_step(4)
    viewer.screenshot(artifacts / "viewer-image-env.png")


def test_compressed_recording_shows_the_recorded_pixels_and_values(
    open_viewer: Callable[[Path], Viewer], tmp_path: Path, artifacts: Path
) -> None:
    """compression="zstd" (FORMAT.md §6.2): the page decompresses (vendored fzstd) and draws
    load()'s pixels, and shows its numbers, in episodes split across batches."""

    def square(env: Any) -> dict[str, np.ndarray]:  # compressible: a square moving on a field
        img = np.full((48, 64, 3), 16, np.uint8)
        x = env.t % 56
        img[10:18, x : x + 8] = (250, 40 + env.t, 90)
        return {"pixels": img, "pos": np.array([x, 10], np.float32)}

    directory = tmp_path / "rec"
    _record_pixels_env(
        directory, (48, 64, 3), square, length=30, seed=2, compression="zstd", batch_bytes=4000
    )
    batches = [json.loads(p.read_text()) for p in directory.glob("openaigym.trace.*.ep*.json")]
    assert any(
        ep["observations"]["fields"]["pixels"].get("codec") == "zstd"
        for b in batches
        for ep in b["episodes"]
    )

    viewer = open_viewer(directory)
    episodes = _assert_page_matches_reader(viewer, directory)
    for ep in (episodes[0], episodes[-1]):
        viewer.select(ep.index)
        for step in (0, 1, ep.length // 2, ep.length):
            viewer.set_step(step)
            got = viewer.frame("obs.pixels", step)
            np.testing.assert_array_equal(got[:, :, :3], ep.observations["pixels"][step])
            shown = viewer.components()
            assert_value(shown["obs.pos[0]"], float(ep.observations["pos"][step, 0]))
        # (no rendered frames: the player's default speed, whatever the env's render_fps)
        assert viewer.page.locator("[data-testid=fps]").input_value() == "15"
    assert not viewer.error_visible()
    viewer.screenshot(artifacts / "viewer-compressed.png")


@pytest.mark.parametrize("compression", [None, "zstd"])
def test_rendered_frames_are_drawn_beside_the_plots(
    open_viewer: Callable[[Path], Viewer], tmp_path: Path, artifacts: Path, compression: str | None
) -> None:
    """record_render=True on real CartPole (FORMAT.md §4, render_frames): the page draws the
    recorded frame of every step it is moved to, raw (split across batches) or compressed,
    next to the observation plots, on the one step slider."""
    pytest.importorskip("pygame")
    import gymnasium

    from gym_recording.wrappers import TraceRecordingWrapper

    directory = tmp_path / "rec"
    with TraceRecordingWrapper(
        gymnasium.make("CartPole-v1", render_mode="rgb_array"),
        directory,
        record_render=True,
        compression=compression,
        batch_bytes=3_000_000,
    ) as env:
        env.action_space.seed(1)
        for seed in (0, 1):
            env.reset(seed=seed)
            for _ in range(12):
                if env.step(env.action_space.sample())[2]:
                    break
    viewer = open_viewer(directory)
    episodes = _assert_page_matches_reader(viewer, directory)
    for ep in episodes:
        viewer.select(ep.index)
        for step in (0, 1, ep.length // 2, ep.length):
            viewer.set_step(step)
            got = viewer.frame("render", step)
            np.testing.assert_array_equal(got[:, :, :3], ep.render_frames[step])
            assert int(got[:, :, 3].min()) == 255
            assert viewer.components()["obs[0]"]  # the plots are there too
    assert viewer.page.locator("[data-testid=frame-canvas][data-source=render]").count() == 1
    # The player runs at CartPole's metadata["render_fps"] (the manifest's render_fps) until
    # the reader picks a speed, which then holds for the other episodes.
    speed = viewer.page.locator("[data-testid=fps]")
    assert float(speed.input_value()) == env.metadata["render_fps"] == 50
    speed.select_option("10")
    viewer.select(episodes[0].index)
    assert viewer.page.locator("[data-testid=fps]").input_value() == "10"
    assert not viewer.error_visible()
    viewer.screenshot(artifacts / f"viewer-rendered-{compression or 'raw'}.png")


def test_frame_stacks_are_shown_and_small_grids_are_not(
    open_viewer: Callable[[Path], Viewer], tmp_path: Path
) -> None:
    """A uint8[4, 24, 32] frame stack is drawn as the newest frame of each stack, grayscale;
    a 7x7x3 grid (MiniGrid's symbolic observation) is not drawn as a picture (Episode.frames'
    rule)."""
    import gym_recording

    directory = tmp_path / "rec"
    rng = np.random.default_rng(3)
    stacks = rng.integers(0, 256, (6, 4, 24, 32), dtype=np.uint8)
    grids = rng.integers(0, 11, (6, 7, 7, 3), dtype=np.uint8)
    with gym_recording.TraceRecording(directory) as rec:
        rec.add_reset({"stack": stacks[0], "grid": grids[0]})
        for t in range(1, 6):
            rec.add_step(0, {"stack": stacks[t], "grid": grids[t]}, 1.0)
    viewer = open_viewer(directory)
    _assert_page_matches_reader(viewer, directory)
    viewer.select(0)
    for step in (0, 3, 5):
        viewer.set_step(step)
        got = viewer.frame("obs.stack", step)
        for channel in range(3):
            np.testing.assert_array_equal(got[:, :, channel], stacks[step, -1])
    names = viewer.page.eval_on_selector_all(
        "[data-testid=frame-canvas]", "els => els.map(e => e.dataset.name)"
    )
    assert names == ["obs.stack"]
    assert not viewer.error_visible()


VERSIONS_DIR = ROOT / "tests" / "data" / "versions"
VERSION_CASES = sorted(
    (v.name, case)
    for v in VERSIONS_DIR.iterdir()
    if (v / "expected.json").is_file()
    for case in json.loads((v / "expected.json").read_text(encoding="utf-8"))["cases"]
)


@pytest.mark.parametrize(("version", "case"), VERSION_CASES)
def test_a_recording_of_an_earlier_release_shows_as_that_release_read_it(
    open_viewer: Callable[[Path], Viewer], version: str, case: str, tmp_path: Path
) -> None:
    """Every episode of tests/data/versions (see tests/test_versions.py), each writer's in
    its order, with the length and flags that release's own reader gave; each opens."""
    doc = json.loads((VERSIONS_DIR / version / "expected.json").read_text(encoding="utf-8"))
    expected = doc["cases"][case]
    want = {
        writer: [
            (str(e["rewards"][2][0]), str(e["terminated"]).lower(), str(e["truncated"]).lower())
            for e in episodes
        ]
        for writer, episodes in expected.items()
    }
    shutil.copytree(VERSIONS_DIR / version / case, tmp_path / case)
    viewer = open_viewer(tmp_path / case)
    viewer.wait_count(sum(len(e) for e in want.values()))
    got: dict[str, list[tuple[str, str, str]]] = {}
    for row in sorted(viewer.rows(), key=lambda r: int(r["index"])):
        got.setdefault(row["writer"], []).append(
            (row["length"], row["terminated"], row["truncated"])
        )
    assert got == want
    for row in viewer.rows():
        viewer.select(int(row["index"]))
    assert not viewer.error_visible()
