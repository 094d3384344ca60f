"""A client in another language: Node.js @grpc/grpc-js loading `tensorwire proto` output."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from examples.quickstart import Quickstart
from tensorwire import v1
from tests.support import node as node_support

node = node_support.NODE
ROOT = Path(__file__).resolve().parents[2]

CLIENT_JS = r"""
const grpc = require('@grpc/grpc-js');
const loader = require('@grpc/proto-loader');
const [protoDir, protoFile, target] = process.argv.slice(2);
const def = loader.loadSync(protoFile, {keepCase: true, longs: Number, enums: String,
                                        defaults: false, oneofs: false, includeDirs: [protoDir]});
const pkg = grpc.loadPackageDefinition(def);
const client = new pkg.quickstart.Quickstart(target, grpc.credentials.createInsecure());
client.Summarize({text: 'node speaks grpc too', max_words: 2}, (err, reply) => {
  if (err) { console.error(err.message); process.exit(1); }
  client.Summarize({text: 'x', max_words: 0}, (err2) => {
    const out = {reply, errorCode: err2 ? err2.code : null,
                 errorDetails: err2 ? err2.details : null};
    const chunks = [];
    const stream = client.Spell({word: 'ok'});
    stream.on('data', (m) => chunks.push(m.result));
    stream.on('end', () => {
      out.chunks = chunks; console.log(JSON.stringify(out)); process.exit(0);
    });
    stream.on('error', (e) => { console.error(e.message); process.exit(1); });
  });
});
"""


@pytest.fixture(scope="module")
def node_modules(request: pytest.FixtureRequest) -> Path:
    return node_support.node_modules(request)


@pytest.mark.slow
def test_node_grpc_client_calls_the_server(servers, node_modules: Path, tmp_path: Path):
    server = servers[Quickstart]
    proto = subprocess.run([sys.executable, "-m", "tensorwire", "proto",
                            "examples.quickstart:Quickstart"], capture_output=True, text=True,
                           check=True, cwd=ROOT).stdout
    (tmp_path / "quickstart").mkdir()
    proto_file = tmp_path / "quickstart" / "quickstart.proto"
    proto_file.write_text(proto)
    (tmp_path / "tensorwire" / "v1").mkdir(parents=True)
    (tmp_path / "tensorwire" / "v1" / "types.proto").write_text(v1.proto_source())
    script = node_modules / "client.js"
    script.write_text(CLIENT_JS)
    out = subprocess.run([node, str(script), str(tmp_path), str(proto_file),
                          server.grpc_target], capture_output=True, text=True, timeout=60,
                         cwd=node_modules)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["reply"] == {"summary": "node speaks", "words": 4}
    assert result["errorCode"] == 3  # INVALID_ARGUMENT
    assert "max_words" in result["errorDetails"]
    assert result["chunks"] == ["o", "k"]
