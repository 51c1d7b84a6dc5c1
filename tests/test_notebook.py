"""examples/playback.ipynb runs end to end in a real Jupyter kernel (nbclient), headless.

The notebook is committed with its outputs cleared; here it runs in a kernel of this Python, with
its working directory and temporary files in tmp_path, and any error in any cell fails the test.
"""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

import pytest

NOTEBOOK = Path(__file__).resolve().parent.parent / "examples" / "playback.ipynb"


def need(*modules: str) -> None:
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        reason = f"the notebook test needs {', '.join(missing)} (pip install nbclient ipykernel)"
        if os.environ.get("GYM_RECORDING_REQUIRE_ALL"):
            pytest.fail(reason)
        pytest.skip(reason)


def test_notebook_is_committed_without_outputs() -> None:
    need("nbformat")
    import nbformat

    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code
    for cell in code:
        assert cell.outputs == [], f"cell {cell.source[:40]!r} has outputs"
        assert cell.execution_count is None


def test_playback_notebook_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    need("nbformat", "nbclient", "ipykernel", "pandas", "matplotlib")
    import nbformat
    from ipykernel.kernelspec import write_kernel_spec
    from nbclient import NotebookClient

    # A kernel spec for this very Python, found before any other, and every file in tmp_path.
    write_kernel_spec(str(tmp_path / "jupyter" / "kernels" / "gym-recording-test"))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.delenv("MPLBACKEND", raising=False)  # the kernel's inline backend

    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(
        nb,
        timeout=600,
        kernel_name="gym-recording-test",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()  # raises CellExecutionError on the first failing cell

    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    html = [o.data["text/html"] for o in outputs if "text/html" in o.get("data", {})]
    pngs = [o for o in outputs if "image/png" in o.get("data", {})]
    stdout = "".join(o.get("text", "") for o in outputs if o.get("name") == "stdout")
    assert len(pngs) >= 2, "expected the returns plot and the episode plot"
    animations = [h for h in html if 'type="range"' in h and "data:image/png;base64" in h]
    assert len(animations) >= 2, "expected frames of the image env and of a replay"
    assert any("gymrec" in h and "CartPole-v1" in h for h in html)  # Recording's repr
    assert "reproduced all" in stdout
    assert re.search(r"\(\d+, 48, 48, 3\) uint8", stdout), stdout
    # Everything the notebook recorded went under tmp_path.
    assert list(tmp_path.glob("gym-recording-playback-*/cartpole/openaigym.trace.*"))
