"""Run by test_bentoml_compat.py with BentoML 1.4's own clients, in a throwaway venv.

Makes every call of bentoml_calls.py through `bentoml.SyncHTTPClient` and
`bentoml.AsyncHTTPClient` against tensorwire servers, and prints what came back (in
bentoml_calls.norm's form) and the errors, as one JSON line. Not imported by the suite.

    python bentoml_script.py '{"Quickstart": "http://127.0.0.1:3000", ...}' TMP_DIR
"""

import asyncio
import contextlib
import inspect
import json
import pathlib
import sys

import bentoml
from bentoml_calls import calls, norm  # beside this script

urls, tmp = json.loads(sys.argv[1]), pathlib.Path(sys.argv[2])
todo = calls(tmp)


def run_sync() -> dict:
    out = {}
    clients = {name: bentoml.SyncHTTPClient(url) for name, url in urls.items()}
    try:
        for call in todo:
            result = getattr(clients[call.service], call.api)(*call.args, **call.kwargs)
            if inspect.isgenerator(result):
                result = list(result)
            out[call.id] = norm(result)
        errors = {}
        for name, service, api, kwargs in (
                ("invalid", "Quickstart", "summarize", {"text": "x", "max_words": 0}),
                ("internal", "ReviewAnalyzer", "fail", {"message": "db password"})):
            try:
                getattr(clients[service], api)(**kwargs)
            except bentoml.exceptions.BentoMLException as exc:
                errors[name] = {"status": int(exc.error_code), "text": str(exc)}
        out["errors"] = errors
    finally:
        for client in clients.values():
            client.close()
    return out


async def run_async() -> dict:
    out = {}
    async with contextlib.AsyncExitStack() as stack:  # set up on entering, closed on exit
        clients = {name: await stack.enter_async_context(bentoml.AsyncHTTPClient(url))
                   for name, url in urls.items()}
        for call in todo:
            if call.sync_only:
                continue
            result = getattr(clients[call.service], call.api)(*call.args, **call.kwargs)
            if inspect.isasyncgen(result):
                result = [item async for item in result]
            else:
                result = await result
            out[call.id] = norm(result)
    return out


print(json.dumps({"bentoml": bentoml.__version__, "sync": run_sync(),
                  "async": asyncio.run(run_async())}))
