"""The calls BentoML's client makes in test_bentoml_compat.py, and how results compare.

Imported by the test (tensorwire's client makes the same calls) and by bentoml_script.py
in the throwaway BentoML venv, so it needs nothing but numpy (torch, pandas and PIL are
imported by the calls that use them, both venvs have them).
"""

from __future__ import annotations

import hashlib
import pathlib
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Call:
    id: str
    service: str  # a key of the URL map: the example service's class name
    api: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    #: BentoML's AsyncHTTPClient cannot send a root file input, whatever the server:
    #: it hands httpx.AsyncClient a sync iterator over the file (1.4.40).
    sync_only: bool = False


def calls(tmp: pathlib.Path) -> list[Call]:
    """Every example API BentoML serves too, with inputs made here (files under tmp,
    written by the test: blob.bin, song.mp3, a.txt, photo.png, seven.jpg)."""
    import numpy as np
    import pandas as pd
    import torch

    x = np.array([[5.1, 3.5, 1.4, 0.2]], np.float32)
    return [
        Call("summarize", "Quickstart", "summarize", kwargs={"text": "a b c d", "max_words": 2}),
        Call("upper", "Quickstart", "upper", ("root input",)),
        Call("count", "Quickstart", "count", ("a bb ccc",)),
        Call("spell", "Quickstart", "spell", kwargs={"word": "abc"}),
        Call("generate", "LanguageModel", "generate", kwargs={"prompt": "hi", "max_tokens": 4}),
        Call("agenerate", "LanguageModel", "agenerate", kwargs={"prompt": "ab", "max_tokens": 3}),
        Call("complete", "TextGenerator", "complete",
             kwargs={"prompt": "a b c", "temperature": 1.5, "max_tokens": 300}),
        Call("analyze", "ReviewAnalyzer", "analyze",
             kwargs={"params": {"text": "good shoes", "stars": 5, "tags": ["red"]}}),
        Call("search", "ReviewAnalyzer", "search", kwargs={"query": "red", "top_k": 1}),
        Call("shout", "ReviewAnalyzer", "shout", ("quiet",)),
        Call("stats", "ReviewAnalyzer", "stats", ([1, 2, 3],)),
        Call("digest", "Kitchen", "digest", kwargs={"data": tmp / "blob.bin", "label": "p"}),
        Call("digest-default", "Kitchen", "digest", kwargs={"data": tmp / "blob.bin"}),
        Call("raw-size", "Kitchen", "raw_size", (tmp / "blob.bin",), sync_only=True),
        Call("transcribe", "AudioFiles", "transcribe", kwargs={"audio": tmp / "song.mp3"}),
        Call("speak", "AudioFiles", "speak", kwargs={"text": "hi", "rate": 4000}),
        Call("append", "AudioFiles", "append", kwargs={"file": tmp / "a.txt", "line": "more"}),
        Call("checksum", "AudioFiles", "checksum", (tmp / "a.txt",), sync_only=True),
        Call("upload-image", "ImageTools", "upload_image", (tmp / "photo.png",), sync_only=True),
        Call("resize", "ImageTools", "resize",
             kwargs={"image": tmp / "photo.png", "width": 8, "height": 6}),
        Call("mirror-png", "ImageTools", "mirror_png", (tmp / "photo.png",), sync_only=True),
        Call("predict-digit", "ImageTools", "predict_digit", kwargs={"image": tmp / "seven.jpg"}),
        Call("describe", "ImageTools", "describe",
             kwargs={"image": tmp / "photo.png", "caption": "a cat", "tags": ["x", "y"]}),
        Call("sizes", "ImageTools", "sizes",
             kwargs={"images": [tmp / "photo.png", tmp / "seven.jpg"]}),
        Call("file-sizes", "ImageTools", "file_sizes",
             kwargs={"files": [tmp / "seven.jpg", tmp / "a.txt"]}),
        Call("classify-numpy", "Iris", "classify", kwargs={"x": x}),
        Call("classify-torch", "Iris", "classify", kwargs={"x": torch.tensor(x)}),
        Call("predict-root", "Iris", "predict", (x,)),
        Call("species", "Iris", "species", kwargs={"x": np.vstack([x, x * 2])}),
        Call("nearest", "Retrieval", "nearest",
             kwargs={"query": {"vector": np.array([1, 0], np.float16), "label": "q"},
                     "candidates": np.array([[1, 0], [0, 1]], np.float16)}),
        Call("normalize", "Retrieval", "normalize",
             kwargs={"vector": np.array([3, 4], np.float16), "label": "AB"}),
        Call("ratios", "Frames", "ratios",
             kwargs={"df": pd.DataFrame({"species": ["s"], "length": [5.0], "width": [2.0]})}),
        Call("totals", "Frames", "totals",
             kwargs={"df": pd.DataFrame({"item": ["a", "b"], "qty": [2, 3],
                                         "price": [1.5, 2.0]})}),
        Call("count-root", "Frames", "count",
             (pd.DataFrame({"item": ["a"], "qty": [1], "price": [1.0]}),)),
    ]


def norm(value: Any) -> Any:
    """A JSON-able form that keeps what a caller sees: types of numbers, array shapes and
    values, frame columns, file contents (by digest and extension), stream items."""
    module = type(value).__module__ or ""
    if isinstance(value, bool | int | float | str) or value is None:
        return [type(value).__name__, value]
    if isinstance(value, bytes):
        return ["bytes", hashlib.sha1(value).hexdigest()]
    if isinstance(value, pathlib.Path):
        return ["file", value.suffix, hashlib.sha1(value.read_bytes()).hexdigest()]
    if module.startswith("numpy"):
        import numpy as np

        array = np.asarray(value)
        return ["ndarray", list(array.shape), np.round(array.astype("f8"), 3).tolist()]
    if module.startswith("pandas"):
        return ["DataFrame", [str(c) for c in value.columns],
                {str(k): norm(v) for k, v in value.to_dict(orient="list").items()}]
    if isinstance(value, dict):
        return {str(k): norm(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [norm(v) for v in value]
    return ["?", type(value).__name__, repr(value)]
