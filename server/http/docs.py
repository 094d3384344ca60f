"""`/docs`: Swagger UI from the packaged swagger-ui-dist assets (no CDN at run time).

The page links its assets and the OpenAPI document relatively (`docs/static/...`,
`docs.json`), so it works as served at `/docs` and behind a proxy that serves the
server under a path prefix (`/prefix/docs`); the calls Swagger UI makes go to the
OpenAPI document's server URL, the `root_path` setting.

With `--auth-token` the page and its assets load without the token, but `docs.json`
needs it (unless `auth_open_docs`): the page fetches the document first and, on a 401,
asks for the token in a small form, then hands it to Swagger UI twice: for its own fetch
of the document (a request interceptor, on the requests that load the spec only) and
as the bearer scheme's authorization (so "Try it out" sends it; the Authorize dialog
can still change it). A token already given (this tab's, or the one Swagger UI keeps
with `persistAuthorization`) is tried first, so a reload asks nothing.
"""

from __future__ import annotations

import html
import json
from importlib import resources
from pathlib import Path

from aiohttp import web

from .schema import BEARER

_ASSETS = {
    "swagger-ui-bundle.js": "application/javascript",
    "swagger-ui.css": "text/css",
    "favicon-32x32.png": "image/png",
}

_PAGE = """<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>{title} - API docs</title>
  <link rel="stylesheet" href="docs/static/swagger-ui.css">
  <link rel="icon" type="image/png" href="docs/static/favicon-32x32.png">
  <style>
    #tw-auth {{font-family: sans-serif; max-width: 36em; margin: 3em auto;}}
    #tw-auth input {{width: 100%; padding: .5em; margin: .5em 0; box-sizing: border-box;}}
    #tw-why {{color: #b00;}}
  </style>
</head>
<body>
  <form id="tw-auth" hidden>
    <h2>{title}</h2>
    <p>This server needs its bearer token to show its APIs.</p>
    <label for="tw-token">Token</label>
    <input id="tw-token" type="password" autocomplete="current-password" required>
    <button type="submit">Authorize</button>
    <p id="tw-why"></p>
  </form>
  <div id="swagger-ui"></div>
  <script src="docs/static/swagger-ui-bundle.js"></script>
  <script>
    const KEY = "tensorwire-docs-token", SCHEME = {scheme};
    const bearer = token => token ? {{Authorization: "Bearer " + token}} : {{}};
    function known() {{
      try {{
        return sessionStorage.getItem(KEY) ||
          JSON.parse(localStorage.getItem("authorized") || "{{}}")[SCHEME].value;
      }} catch (e) {{ return null; }}
    }}
    function ask(why) {{
      const form = document.getElementById("tw-auth");
      document.getElementById("tw-why").textContent = why;
      form.hidden = false;
      form.onsubmit = event => {{
        event.preventDefault();
        form.hidden = true;
        start(document.getElementById("tw-token").value.trim());
      }};
    }}
    async function start(token) {{
      const reply = await fetch("docs.json", {{headers: bearer(token)}});
      if (reply.status === 401) {{
        sessionStorage.removeItem(KEY);
        return ask(token ? "That token was refused." : "");
      }}
      if (token) sessionStorage.setItem(KEY, token);
      window.ui = SwaggerUIBundle({{url: "docs.json", dom_id: "#swagger-ui",
                                   deepLinking: true, tryItOutEnabled: true,
                                   persistAuthorization: true,
        requestInterceptor: request => {{
          if (request.loadSpec && token) {{
            request.headers = Object.assign(request.headers || {{}}, bearer(token));
          }}
          return request;
        }},
        onComplete: () => {{ if (token) window.ui.preauthorizeApiKey(SCHEME, token); }}}});
    }}
    start(known());
  </script>
</body>
</html>
"""


def static_dir() -> Path:
    return Path(str(resources.files("tensorwire").joinpath("static", "swagger")))


def docs_page(title: str) -> web.Response:
    page = _PAGE.format(title=html.escape(title), scheme=json.dumps(BEARER))
    return web.Response(text=page, content_type="text/html")


async def docs_asset(request: web.Request) -> web.StreamResponse:
    name = request.match_info["name"]
    media = _ASSETS.get(name)
    if media is None:
        raise web.HTTPNotFound()
    return web.FileResponse(static_dir() / name, headers={
        "Content-Type": media, "Cache-Control": "public, max-age=86400"})
