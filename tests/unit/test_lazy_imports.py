"""`import tensorwire` and NumPy-only services never load the heavy frameworks."""

from __future__ import annotations

import subprocess
import sys
import textwrap

HEAVY = ("torch", "tensorflow", "pandas", "PIL", "ml_dtypes", "jax")


def imported_modules(code: str) -> set[str]:
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", code],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() in ("", "[]"), proc.stdout
    names = set()
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip())
    assert names, proc.stderr[-2000:]
    return names


def heavy(names: set[str]) -> set[str]:
    return {n for n in names if n.split(".")[0] in HEAVY}


def test_import_tensorwire_loads_no_framework() -> None:
    names = imported_modules("import tensorwire")
    assert "tensorwire" in names
    assert heavy(names) == set()


def test_a_numpy_service_served_over_both_protocols_loads_no_other_framework() -> None:
    code = textwrap.dedent("""
        import typing as t
        import numpy as np
        import tensorwire
        from tensorwire.validators import DType, Shape
        from tensorwire.protobuf.descriptors import service_proto
        from tensorwire.http.schema import openapi
        from tensorwire.contract.decoding import Decoder

        class Item(tensorwire.IODescriptor):
            v: t.Annotated[np.ndarray, DType("float16")]

        @tensorwire.service
        class S:
            @tensorwire.api
            def f(self, x: t.Annotated[np.ndarray, Shape((-1, 2)), DType("float32")],
                  item: Item) -> np.ndarray:
                return x

        spec = tensorwire.get_service_spec(S)
        service_proto(spec).proto_text()
        openapi(spec)
        api = spec.apis["f"]
        Decoder(api).decode_json(b'{"x": [[1, 2]], "item": {"v": [1]}}')

        import sys
        assert "tensorwire.codecs.tensor" in sys.modules
        print(sorted(m for m in sys.modules if m.split(".")[0] in {heavy!r}))
    """).replace("{heavy!r}", repr(set(HEAVY)))
    names = imported_modules(code)
    assert heavy(names) == set()
