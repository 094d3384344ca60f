"""Run by test_bentoml_compat.py with BentoML 1.4's own client, in a throwaway venv.

Calls a tensorwire server's JSON, file and root-input APIs through BentoML's sync HTTP
client (`bentoml.SyncHTTPClient`)
and prints what came back (and the errors) as JSON. Not imported by the test suite.
"""

import json
import pathlib
import sys

import bentoml

# BentoML 1.4 names its HTTP client SyncHTTPClient (bentoml.SyncClient elsewhere).
SyncClient = getattr(bentoml, "SyncClient", None) or bentoml.SyncHTTPClient
quickstart, models, kitchen, tmp = sys.argv[1:5]
out = {"bentoml": bentoml.__version__, "client": SyncClient.__name__}
with SyncClient(quickstart) as client:
    out["summarize"] = client.summarize(text="a b c d", max_words=2)
    out["upper"] = client.upper("root input")
    try:
        client.summarize(text="x", max_words=0)
    except bentoml.exceptions.BentoMLException as exc:
        out["error"] = {"status": int(exc.error_code), "text": str(exc)}
with SyncClient(models) as client:
    out["analyze"] = client.analyze(params={"text": "good shoes", "stars": 5})
    out["search"] = client.search(query="red", top_k=1)
    out["stats"] = client.stats([1, 2, 3])
with SyncClient(kitchen) as client:
    blob = pathlib.Path(tmp) / "blob.bin"
    blob.write_bytes(bytes(range(256)) * 4)
    out["digest_path"] = client.digest(data=blob, label="from a path")
    # (BentoML 1.4's client cannot send an open file: it asserts typing.BinaryIO.)
    out["digest_default"] = client.digest(data=blob)
    out["raw_size"] = client.raw_size(blob)
print(json.dumps(out))
