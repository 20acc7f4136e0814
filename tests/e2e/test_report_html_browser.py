"""``tl-rebuild report --html`` opened in a real headless Chromium (the OS package).

The browser is driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``:
commands on fd 3, replies on fd 4, NUL-delimited JSON), so no client library is needed. Each
test writes a page with the real command, loads it from ``file://`` and reads back what the
browser saw: the title, the text, the chart's bytes per category summed from the SVG's
``data-bytes`` (they must equal the ``dirty`` ledger of the same transcript), every console
error and uncaught exception, and every network request (only the page itself may load).
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.transcripts import Transcript, image, thinking, tool_use
from tests.runtime.codex_rollouts import Rollout

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CORPUS = Path("/work/shared/corpus")
REPLY_TIMEOUT_S = 30.0
LOAD_TIMEOUT_S = 30.0
LEADING = "\n\nstarts with two newlines,\r\nhas a CRLF and ünïcode 🙂"
HOSTILE = "</script><img src=x onerror=alert(1)><script>fetch('http://127.0.0.1:9/x')</script>"

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium; .ci/run "
    "installs it)")


class Browser:
    """One headless Chromium on a DevTools pipe, with one page attached (flat sessions)."""

    def __init__(self, profile: Path) -> None:
        to_r, self._to = os.pipe()
        self._from, from_w = os.pipe()

        def onto_3_and_4() -> None:  # in the child: the pipe ends become fds 3 and 4
            high_r = fcntl.fcntl(to_r, fcntl.F_DUPFD, 10)
            high_w = fcntl.fcntl(from_w, fcntl.F_DUPFD, 10)
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        argv = [str(CHROMIUM), "--headless", "--remote-debugging-pipe",
                f"--user-data-dir={profile}", "--no-first-run", "--no-default-browser-check",
                "--disable-gpu", "--disable-extensions", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--mute-audio"]
        if os.geteuid() == 0:
            argv.append("--no-sandbox")  # Chromium refuses to run as root with its sandbox
        self.proc = subprocess.Popen(  # noqa: PLW1509 - preexec: the fds must be 3 and 4
            [*argv, "about:blank"], preexec_fn=onto_3_and_4, close_fds=False,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        os.close(to_r)
        os.close(from_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target,
                                 flatten=True)["sessionId"]

    def call(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        """Send one command and return its result (events that arrive meanwhile are kept)."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._to, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + REPLY_TIMEOUT_S
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise AssertionError(f"{method} failed: {reply['error']}")
                return dict(reply.get("result", {}))
            self.events.append(reply)

    def page(self, method: str, **params: Any) -> dict[str, Any]:
        return self.call(method, self.session, **params)

    def wait_for(self, method: str, timeout: float) -> None:
        """Read events until ``method`` arrives on the page's session (bounded)."""
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == method for e in self.events):
            self.events.append(self._read(deadline))

    def evaluate(self, expression: str) -> Any:
        result = self.page("Runtime.evaluate", expression=expression, returnByValue=True)
        assert "exceptionDetails" not in result, f"{expression!r}: {result['exceptionDetails']}"
        return result["result"].get("value")

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from], [], [], left)[0]:
                raise AssertionError("chromium did not answer on the DevTools pipe in time")
            chunk = os.read(self._from, 1 << 16)
            if not chunk:
                raise AssertionError(f"chromium closed the DevTools pipe: {self._stderr()}")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return dict(json.loads(message))

    def _stderr(self) -> str:
        self.proc.kill()
        return (self.proc.communicate(timeout=10)[1] or b"").decode(errors="replace")[-2000:]

    def close(self) -> None:
        try:
            os.write(self._to, json.dumps({"id": 0, "method": "Browser.close"}).encode() + b"\0")
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        finally:
            if self.proc.stderr:
                self.proc.stderr.close()
            os.close(self._to)
            os.close(self._from)


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Browser]:
    chromium = Browser(tmp_path / "chromium-profile")
    try:
        yield chromium
    finally:
        chromium.close()


def open_page(browser: Browser, page: Path) -> dict[str, Any]:
    """Load ``page`` and return what the browser saw: title, text, chart sums, errors, requests."""
    for domain in ("Runtime", "Log", "Network", "Page"):
        browser.page(f"{domain}.enable")
    browser.page("Page.navigate", url=page.as_uri())
    browser.wait_for("Page.loadEventFired", LOAD_TIMEOUT_S)
    seen = {
        "title": browser.evaluate("document.title"),
        "text": browser.evaluate("document.body.innerText"),
        "chart": browser.evaluate(
            "(() => { const s = {}; for (const r of document.querySelectorAll("
            "'svg rect[data-category]')) { const c = r.dataset.category; "
            "s[c] = (s[c] || 0) + Number(r.dataset.bytes); } return s; })()"),
        "carried": browser.evaluate(
            "[...document.querySelectorAll('#conversation-chart rect')].reduce("
            "(n, r) => n + Number(r.dataset.conversationBytes), 0)"),
        "carried_said": browser.evaluate(
            "document.getElementById('carried-bytes').dataset.bytes"),
        # what the page shows of each utterance, measured the way the chart counts it
        "texts": browser.evaluate(
            "[...document.querySelectorAll('#conversation pre')].map(p => p.textContent)"),
        "text_bytes": browser.evaluate(
            "[...document.querySelectorAll('#conversation pre')].reduce("
            "(n, p) => n + new TextEncoder().encode(p.textContent).length, 0)"),
        "images": browser.evaluate("document.images.length"),
        "scripts": browser.evaluate("document.scripts.length"),
    }
    events = browser.events
    seen["errors"] = (
        [e["params"] for e in events if e.get("method") == "Runtime.exceptionThrown"]
        + [e["params"] for e in events if e.get("method") == "Runtime.consoleAPICalled"
           and e["params"].get("type") == "error"]
        + [e["params"] for e in events if e.get("method") == "Log.entryAdded"
           and e["params"]["entry"].get("level") == "error"])
    seen["requests"] = [e["params"]["request"]["url"] for e in events
                        if e.get("method") == "Network.requestWillBeSent"]
    return seen


def tl_rebuild(*argv: str) -> dict[str, Any]:
    """Run the installed console command (next to this interpreter) and return its JSON."""
    command = [str(Path(sys.executable).with_name("tl-rebuild")), *argv, "--json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def ledger_totals(transcript: Path) -> dict[str, int]:
    dirty = tl_rebuild("dirty", "--transcript", str(transcript))
    totals = {k: v for k, v in dirty["categories"].items() if v}
    if dirty["malformed_bytes"]:
        totals["malformed"] = dirty["malformed_bytes"]
    return totals


def noisy_session(folder: Path) -> Path:
    t = Transcript()
    t.user("please look at the screenshot")
    t.assistant([thinking("hmm " * 300), tool_use("Read", {"file_path": "/srv/a.png"})])
    t.user([{"type": "tool_result", "tool_use_id": "t1", "content": [image(40_000)]}])
    t.assistant("it shows a login form")
    t.user(HOSTILE)
    t.tool_round(result="x" * 20_000)
    t.assistant("that text is shown as text, not run")
    t.user(LEADING)
    return t.write(folder / "11111111-2222-3333-4444-555555555555.jsonl")


def test_the_page_renders_with_the_ledger_totals_and_makes_no_request_and_no_error(
    tmp_path: Path, browser: Browser
) -> None:
    source = noisy_session(tmp_path)
    out = tmp_path / "report.html"
    result = tl_rebuild("report", "--html", str(out), "--transcript", str(source))
    seen = open_page(browser, out)
    assert seen["title"] == "Threadline report: session 11111111-2222-3333-4444-555555555555"
    for said in ("please look at the screenshot", "it shows a login form", HOSTILE,
                 "that text is shown as text, not run"):
        assert said in seen["text"]
    assert seen["chart"] == ledger_totals(source)
    assert seen["chart"]["image"] > 40_000 and seen["chart"]["tool_result"] > 20_000
    said = ["please look at the screenshot", "it shows a login form", HOSTILE,
            "that text is shown as text, not run", LEADING]
    assert seen["texts"] == said  # verbatim in the browser: leading newlines and CR kept
    carried = sum(len(x.encode()) for x in said)
    assert seen["carried"] == seen["text_bytes"] == carried == result["chart"]["carried_bytes"]
    assert seen["carried_said"] == str(carried)
    assert seen["images"] == 0 and seen["scripts"] == 0  # the hostile tags stayed text
    assert seen["errors"] == []
    assert seen["requests"] == [out.as_uri()]
    assert "no operation (no state_dir configured)" in seen["text"]


def test_a_real_corpus_transcript_renders_with_its_ledger_totals(
    tmp_path: Path, browser: Browser
) -> None:
    source = CORPUS / "samar-58__scout__claude-session.jsonl"
    if not source.is_file():
        pytest.skip(f"corpus transcript {source} is missing")
    out = tmp_path / "corpus.html"
    result = tl_rebuild("report", "--html", str(out), "--transcript", str(source))
    seen = open_page(browser, out)
    assert seen["chart"] == ledger_totals(source) == result["categories"]
    assert result["chart"]["bars"] > 1  # a session of hours spreads over several bars
    assert seen["errors"] == [] and seen["requests"] == [out.as_uri()]
    assert f"Carried conversation ({result['utterances']} utterances)" in seen["text"]
    # the conversation chart sums to the bytes of the utterances the browser shows
    assert seen["carried"] == seen["text_bytes"] == result["chart"]["carried_bytes"] > 0


def test_a_codex_rollout_renders_with_its_own_ledger_totals(tmp_path: Path, browser: Browser
                                                           ) -> None:
    rollout = Rollout()
    rollout.exchange("build it", "built")
    rollout.tool_round()
    rollout.exchange(HOSTILE, "still text")
    source = rollout.write(tmp_path / "sessions")
    out = tmp_path / "codex.html"
    tl_rebuild("report", "--html", str(out), "--transcript", str(source))
    seen = open_page(browser, out)
    assert seen["title"] == f"Threadline report: session {rollout.id}"
    assert all(said in seen["text"] for said in ("build it", "built", HOSTILE, "still text"))
    assert seen["chart"] == ledger_totals(source) and "harness_message" in seen["chart"]
    assert seen["texts"] == ["build it", "built", HOSTILE, "still text"]
    assert seen["carried"] == seen["text_bytes"] == sum(
        len(x.encode()) for x in ("build it", "built", HOSTILE, "still text"))
    assert seen["images"] == 0 and seen["scripts"] == 0
    assert seen["errors"] == [] and seen["requests"] == [out.as_uri()]
