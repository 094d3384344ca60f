"""`/docs`: Swagger UI from the packaged swagger-ui-dist assets (no CDN at run time).

The page links its assets and the OpenAPI document relatively (`docs/static/...`,
`docs.json`), so it works as served at `/docs` and behind a proxy that serves the
server under a path prefix (`/prefix/docs`); the calls Swagger UI makes go to the
OpenAPI document's server URL, the `root_path` setting.
"""

from __future__ import annotations

import html
from importlib import resources
from pathlib import Path

from aiohttp import web

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
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="docs/static/swagger-ui-bundle.js"></script>
  <script>
    window.ui = SwaggerUIBundle({{url: "docs.json", dom_id: "#swagger-ui",
                                 deepLinking: true, tryItOutEnabled: true,
                                 persistAuthorization: true}});
  </script>
</body>
</html>
"""


def static_dir() -> Path:
    return Path(str(resources.files("tensorwire").joinpath("static", "swagger")))


def docs_page(title: str) -> web.Response:
    return web.Response(text=_PAGE.format(title=html.escape(title)), content_type="text/html")


async def docs_asset(request: web.Request) -> web.StreamResponse:
    name = request.match_info["name"]
    media = _ASSETS.get(name)
    if media is None:
        raise web.HTTPNotFound()
    return web.FileResponse(static_dir() / name, headers={
        "Content-Type": media, "Cache-Control": "public, max-age=86400"})
