"""Swagger UI in a real browser: headless Chromium loads /docs of a server with auth on,
gives the bearer token where the page asks for it before it fetches the OpenAPI document
(closed by default), or through Swagger UI's Authorize dialog (`auth_open_docs`), runs a
JSON API and a file-upload API from their "Try it out" forms, and reads the responses.

Chromium is driven over the DevTools protocol (aiohttp's websocket client); the test is
skipped where no Chromium is installed (Debian: `apt-get install chromium`).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import aiohttp
import pytest

import tensorwire
from tests.support.servers import serving

TOKEN = "swagger-token"


@tensorwire.service
class DocsDemo:
    """Two APIs for the browser: JSON in and out, and a file upload."""

    @tensorwire.api
    def greet(self, name: str = "world") -> dict[str, str]:
        """Greet someone."""
        return {"greeting": f"hello {name}"}

    @tensorwire.api
    def size(self, file: Path, label: str = "upload") -> dict[str, object]:
        """The size of an uploaded file."""
        return {"label": label, "size": file.stat().st_size}


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("no Chromium installed (apt-get install chromium)")


class Page:
    """One browser tab, over the DevTools protocol."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.ids = itertools.count(1)

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        msg_id = next(self.ids)
        await self.ws.send_json({"id": msg_id, "method": method, "params": params})
        while True:
            msg = await self.ws.receive_json(timeout=60)
            if msg.get("id") == msg_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg["result"]

    async def js(self, expression: str) -> Any:
        """The value of a JS expression (awaited when it is a promise)."""
        result = await self.send("Runtime.evaluate", expression=expression,
                                 awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in result:
            raise AssertionError(f"in the page: {result['exceptionDetails']}")
        return result["result"].get("value")


#: Helpers defined in the page: wait for a condition, set a React-controlled field.
HELPERS = """
window.sleep = ms => new Promise(r => setTimeout(r, ms));
window.waitFor = async (fn, what) => {
  for (let i = 0; i < 300; i++) { const v = fn(); if (v) return v; await sleep(100); }
  throw new Error("timed out waiting for " + what);
};
window.setValue = (el, value) => {
  const proto = el.tagName === "TEXTAREA" ? HTMLTextAreaElement : HTMLInputElement;
  Object.getOwnPropertyDescriptor(proto.prototype, "value").set.call(el, value);
  el.dispatchEvent(new Event("input", {bubbles: true}));
  el.dispatchEvent(new Event("change", {bubbles: true}));
};
window.op = id => document.getElementById("operations-DocsDemo-" + id);
window.openOp = async id => {
  const block = await waitFor(() => op(id), id);
  if (!block.classList.contains("is-open")) {
    (block.querySelector(".opblock-summary-control") || block.querySelector(".opblock-summary"))
      .click();
  }
  await waitFor(() => op(id).querySelector(".opblock-body"), id + " body");
  const tryOut = await waitFor(() => op(id).querySelector("button.try-out__btn") ||
                               op(id).querySelector("button.execute"), id + " try it out");
  if (tryOut.classList.contains("try-out__btn") && !tryOut.classList.contains("cancel")) {
    tryOut.click();
  }
  return await waitFor(() => op(id).querySelector("button.execute"), id + " execute");
};
window.response = async id => {
  const status = await waitFor(
    () => op(id).querySelector(".live-responses-table tr.response .response-col_status"),
    id + " reply");
  const body = op(id).querySelector(".live-responses-table .response-col_description pre");
  return {status: status.textContent.trim(), body: body ? body.textContent : null};
};
true
"""


async def _drive(url: str, devtools: str, upload: Path, open_docs: bool) -> dict[str, Any]:
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{devtools}/json/list") as resp:
            tab = next(t for t in await resp.json() if t["type"] == "page")
        async with http.ws_connect(tab["webSocketDebuggerUrl"], max_msg_size=0) as ws:
            page = Page(ws)
            await page.send("Page.enable")
            await page.send("Page.navigate", url=f"{url}/docs")
            await page.js("new Promise(r => { const check = () => document.readyState === "
                          "'complete' ? r(true) : setTimeout(check, 100); check(); })")
            await page.js(HELPERS)
            out: dict[str, Any] = {}
            if open_docs:
                await _authorize_in_swagger_ui(page)
            else:
                out["asked"] = await _give_the_asked_token(page)

            # a JSON API
            out["greet"] = await page.js("""(async () => {
                await openOp('greet');
                const body = await waitFor(
                  () => op('greet').querySelector('textarea.body-param__text'), 'body');
                setValue(body, JSON.stringify({name: 'chromium'}));
                await sleep(200);
                op('greet').querySelector('button.execute').click();
                return await response('greet'); })()""")
            # a file upload (multipart/form-data)
            await page.js("openOp('size').then(() => true)")
            found = await page.send(
                "Runtime.evaluate",
                expression="waitFor(() => op('size').querySelector('input[type=file]'), "
                           "'file input')", awaitPromise=True)
            await page.send("DOM.enable")
            await page.send("DOM.setFileInputFiles", files=[str(upload)],
                            objectId=found["result"]["objectId"])
            out["size"] = await page.js("""(async () => {
                await sleep(300);
                op('size').querySelector('button.execute').click();
                return await response('size'); })()""")
            return out


async def _give_the_asked_token(page: Page) -> dict[str, Any]:
    """The page asks for the token before it loads the APIs: a wrong one is refused and
    asked again, the right one shows them (and Swagger UI sends it on every call)."""
    return await page.js(f"""(async () => {{
        const form = await waitFor(() => !document.getElementById('tw-auth').hidden &&
                                   document.getElementById('tw-auth'), 'the token form');
        const before = !!document.querySelector('.opblock');
        setValue(document.getElementById('tw-token'), 'wrong');
        form.requestSubmit();
        await waitFor(() => document.getElementById('tw-why').textContent, 'a refusal');
        const refusal = document.getElementById('tw-why').textContent;
        setValue(document.getElementById('tw-token'), {json.dumps(TOKEN)});
        form.requestSubmit();
        await waitFor(() => window.ui && op('greet'), 'the APIs');
        return {{before, refusal}}; }})()""")


async def _authorize_in_swagger_ui(page: Page) -> None:
    """With the documents open, Swagger UI loads at once; its Authorize dialog takes the
    token (the button exists only when the OpenAPI document has a scheme)."""
    await page.js("waitFor(() => window.ui && document.querySelector('.btn.authorize'), "
                  "'the Authorize button').then(b => b.click())")
    await page.js(f"""(async () => {{
        const input = await waitFor(
          () => document.querySelector('.auth-container input'), 'token input');
        setValue(input, {json.dumps(TOKEN)});
        document.querySelector('.auth-btn-wrapper button.authorize').click();
        await waitFor(() => document.querySelector('.auth-btn-wrapper .btn-done'),
                      'authorized');
        document.querySelector('.auth-btn-wrapper .btn-done').click();
        return true; }})()""")


@pytest.mark.parametrize("open_docs", [False, True], ids=["docs-closed", "docs-open"])
def test_swagger_ui_authorizes_and_runs_a_json_and_a_file_api(tmp_path, open_docs):
    chromium = _chromium()
    upload = tmp_path / "notes.txt"
    upload.write_bytes(b"twelve bytes")
    with serving(DocsDemo, auth_token=TOKEN, auth_open_docs=open_docs) as server:
        proc = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu",
             "--disable-background-networking", "--disable-component-update",
             "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}",
             "--remote-debugging-port=0", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            assert proc.stderr is not None
            devtools = None
            for line in proc.stderr:  # "DevTools listening on ws://127.0.0.1:PORT/..."
                match = re.search(r"DevTools listening on ws://([^/]+)/", line)
                if match:
                    devtools = f"http://{match.group(1)}"
                    break
            assert devtools, "Chromium did not start its DevTools endpoint"
            out = asyncio.run(asyncio.wait_for(
                _drive(server.http_url, devtools, upload, open_docs), 120))
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
    if not open_docs:
        assert out["asked"] == {"before": False, "refusal": "That token was refused."}, out
    assert out["greet"]["status"] == "200", out
    assert json.loads(out["greet"]["body"]) == {"greeting": "hello chromium"}
    assert out["size"]["status"] == "200", out
    assert json.loads(out["size"]["body"]) == {"label": "upload", "size": 12}
