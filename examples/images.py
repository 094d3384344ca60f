"""Images with PIL and image files as `Path`: in, out, in batches and beside metadata.

    tensorwire serve examples.images:ImageTools
    .venv/bin/python -m examples.images /tmp/images && cd /tmp/images   # sample images

    curl --data-binary @photo.png -H 'Content-Type: image/png' localhost:3000/upload_image
    curl -F 'image=@photo.jpg' -F 'width=64' -F 'height=64' localhost:3000/resize -o small.jpg
    curl -F 'image=@seven.jpg' localhost:3000/predict_digit
    # 7
    curl -F 'images=@a.png' -F 'images=@b.png' localhost:3000/sizes
    curl -F 'image=@photo.png' localhost:3000/thumbnails   # multipart/form-data response
    curl --data-binary @photo.png -H 'Content-Type: image/png' localhost:3000/mirror_png -o m.png

`predict_digit` is MNIST-shaped (a 28x28 grey image in, a digit out) but its "model" is
a fixed nearest-template classifier over seven-segment digit drawings (`draw_digit`),
made here at start-up: it reads seven-segment digits, not handwriting (the first
held-out digit of `examples/digits.py`, a handwritten 7, it calls a 9). Handwritten
digits are the trained CNN's: `make serve SERVICE=examples.digits:Digits`.
"""

from __future__ import annotations

import sys
import tempfile
import typing as t
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw
from pydantic import Field

import tensorwire
from tensorwire.validators import ContentType

# Seven-segment layout of each digit: top, top-left, top-right, middle, bottom-left,
# bottom-right, bottom.
_SEGMENTS = {
    0: "1110111", 1: "0010010", 2: "1011101", 3: "1011011", 4: "0111010",
    5: "1101011", 6: "1101111", 7: "1010010", 8: "1111111", 9: "1111011",
}
_LINES = [((8, 4), (20, 4)), ((7, 5), (7, 13)), ((21, 5), (21, 13)), ((8, 14), (20, 14)),
          ((7, 15), (7, 23)), ((21, 15), (21, 23)), ((8, 24), (20, 24))]


def draw_digit(digit: int, size: int = 28) -> Image.Image:
    """A white-on-black seven-segment digit (the examples' and tests' input images)."""
    img = Image.new("L", (28, 28), 0)
    pen = ImageDraw.Draw(img)
    for on, line in zip(_SEGMENTS[digit], _LINES, strict=True):
        if on == "1":
            pen.line(line, fill=255, width=3)
    return img.resize((size, size)) if size != 28 else img


def _vector(img: Image.Image) -> np.ndarray:
    v = np.asarray(img.convert("L").resize((28, 28)), dtype=np.float32).ravel()
    norm = float(np.linalg.norm(v))
    return v / norm if norm else v


class Described(tensorwire.IODescriptor):
    """What `describe` says about an image and the metadata sent with it."""

    width: int
    height: int
    mode: str
    format: str | None
    caption: str
    tags: list[str]


class Thumbnails(tensorwire.IODescriptor):
    """Two images and their sizes: one multipart response over HTTP, one gRPC message."""

    small: Image.Image
    large: Image.Image
    sizes: dict[str, list[int]]


@tensorwire.service
class ImageTools:
    """Image APIs: PIL images and image files, alone, in lists and beside other fields."""

    def __init__(self) -> None:
        self.templates = np.stack([_vector(draw_digit(d)) for d in range(10)])

    @tensorwire.api
    def upload_image(self, image: Image.Image, /) -> dict[str, t.Any]:
        """Root input: the request body is the image (any format PIL reads)."""
        return {"width": image.width, "height": image.height, "mode": image.mode,
                "format": image.format}

    @tensorwire.api
    def resize(
        self,
        image: t.Annotated[Image.Image, ContentType("image/*")],
        width: int = Field(ge=1, le=4096),
        height: int = Field(ge=1, le=4096),
    ) -> Image.Image:
        """Resize an image; the answer keeps the upload's format."""
        out = image.resize((width, height))
        out.format = image.format  # resize() makes a new image without one
        return out

    @tensorwire.api
    def mirror_png(self, data: t.Annotated[bytes, ContentType("image/png")], /
                   ) -> t.Annotated[bytes, ContentType("image/png")]:
        """Root `bytes` of a declared media type in, raw `image/png` bytes out."""
        import io

        with Image.open(io.BytesIO(data)) as img:
            out = io.BytesIO()
            img.transpose(Image.Transpose.FLIP_LEFT_RIGHT).save(out, "PNG")
        return out.getvalue()

    @tensorwire.api
    def predict_digit(self, image: t.Annotated[Path, ContentType("image/jpeg")]) -> int:
        """MNIST-style: a JPEG of a seven-segment digit in, the digit out (a template
        matcher; handwritten digits: examples/digits.py)."""
        with Image.open(image) as img:
            scores = self.templates @ _vector(img)
        return int(np.argmax(scores))

    @tensorwire.api
    def describe(
        self,
        image: Image.Image,
        caption: str = Field(max_length=200),
        tags: list[str] = Field(default_factory=list, max_length=20),
    ) -> Described:
        """An image plus metadata fields in one multipart request."""
        return Described(width=image.width, height=image.height, mode=image.mode,
                         format=image.format, caption=caption, tags=tags)

    @tensorwire.api
    def sizes(self, images: list[Image.Image] = Field(min_length=1, max_length=32)
              ) -> list[list[int]]:
        """A batch of images: repeated `images` parts, or a repeated File over gRPC."""
        return [[im.width, im.height] for im in images]

    @tensorwire.api
    def file_sizes(self, files: t.Annotated[list[Path], Field(min_length=1)]
                   ) -> list[list[t.Any]]:
        """A batch of files, each stored in the request's temp dir: [suffix, size] each."""
        return [[p.suffix, p.stat().st_size] for p in files]

    @tensorwire.api
    def thumbnails(self, image: Image.Image) -> Thumbnails:
        """Two-file output: a small and a large copy, with their sizes beside them."""
        small = image.copy()
        small.thumbnail((32, 32))
        large = image.copy()
        large.thumbnail((256, 256))
        small.format = large.format = image.format  # copies have no format of their own
        return Thumbnails(small=small, large=large,
                          sizes={"small": list(small.size), "large": list(large.size)})


def write_samples(folder: Path) -> list[Path]:
    """The images the curl lines above send, written into `folder`: `photo.png` and
    `photo.jpg` (a 64x48 colour gradient), `seven.jpg` (a seven-segment 7, as
    `predict_digit` reads), `a.png` and `b.png` (two sizes)."""
    folder.mkdir(parents=True, exist_ok=True)
    ramp = np.linspace(0, 255, 64, dtype=np.float32)
    pixels = np.stack(np.broadcast_arrays(ramp[None, :], ramp[:48, None], 128.0), axis=-1)
    photo = Image.fromarray(pixels.astype(np.uint8), "RGB")
    images = {"photo.png": photo, "photo.jpg": photo, "seven.jpg": draw_digit(7),
              "a.png": photo.resize((16, 12)), "b.png": photo.resize((32, 24))}
    for name, image in images.items():
        image.save(folder / name)
    return [folder / name for name in images]


if __name__ == "__main__":
    where = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.gettempdir()) / "images"
    for written in write_samples(where):
        print(written)
