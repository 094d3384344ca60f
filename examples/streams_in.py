"""Streams in: audio-like frames go in while a running transcript comes out.

    tensorwire serve examples.streams_in:Transcriber
    grpcurl -plaintext -d '{"lines": "one two"} {"lines": "three"}' \
        localhost:50051 transcriber.Transcriber/WordCount

A parameter annotated `AsyncIterator[T]` (an `async def`) or `Iterator[T]` (a `def`)
takes a stream of `T`, each element validated as a unary input of that type is (here:
float32 frames of one dimension). Returning a value makes the API client-streaming;
returning a generator makes it bidirectional. gRPC serves them as `stream` rpcs, HTTP
as a WebSocket on the API's route (one message per element).

No speech model ships with the project, so the "speech" is a tone alphabet: each
character is 50 ms of one pure tone (`tones` writes it; examples/audio.py's `speak`
makes the same kind of audio), and `transcribe` really listens: it finds each symbol's
frequency with an FFT as its samples arrive, whatever the client's frame size.

    from examples.streams_in import tones
    frames = np.array_split(tones("hello world"), 40)       # any frame sizes
    with tensorwire.SyncClient("grpc://localhost:50051") as client:
        for partial in client.transcribe(iter(frames)):
            print(partial["text"])                           # h, he, hel, ...
"""

from __future__ import annotations

import typing as t
from collections.abc import AsyncGenerator, AsyncIterator, Generator, Iterator

import numpy as np
from pydantic import BaseModel, Field

import tensorwire
from tensorwire.validators import DType, Shape

#: Samples per second of the audio, and samples per symbol (50 ms).
RATE = 8000
SYMBOL = RATE // 20
#: The tone alphabet: symbol i is a tone of BASE + i * STEP Hz.
ALPHABET = " abcdefghijklmnopqrstuvwxyz.,?!'0123456789"
BASE, STEP = 300.0, 60.0

Frame = t.Annotated[np.ndarray, Shape((-1,)), DType("float32")]


def tones(text: str, rate: int = RATE) -> np.ndarray:
    """`text` as audio: one 50 ms tone per character (of ALPHABET), float32 samples."""
    n = np.arange(rate // 20)
    out = [np.sin(2 * np.pi * (BASE + ALPHABET.index(ch) * STEP) * n / rate)
           for ch in text.lower()]
    return (0.5 * np.concatenate(out)).astype(np.float32) if out else np.zeros(0, np.float32)


def symbol_of(samples: np.ndarray) -> str:
    """The character one symbol's samples sound like (its loudest frequency)."""
    spectrum = np.abs(np.fft.rfft(samples))
    freq = np.argmax(spectrum) * RATE / len(samples)
    index = int(np.rint((freq - BASE) / STEP))
    return ALPHABET[index] if 0 <= index < len(ALPHABET) else "?"


class Partial(BaseModel):
    """The transcript so far."""

    text: str = Field(description="Every character heard so far.")
    seconds: float = Field(description="Audio received so far, in seconds.")


class Loudness(BaseModel):
    """What a whole recording measured."""

    frames: int
    seconds: float
    rms: float = Field(description="Root mean square of all samples.")
    peak: float = Field(description="Largest absolute sample.")


@tensorwire.service
class Transcriber:
    """Audio-like frames in, a running transcript (or one measurement) out."""

    @tensorwire.api
    async def transcribe(
        self,
        audio: AsyncIterator[Frame] = Field(description="float32 samples at 8 kHz, any "
                                                        "number per frame"),
    ) -> AsyncGenerator[Partial, None]:
        """Bidirectional: the transcript so far after each character heard."""
        pending = np.zeros(0, np.float32)
        text, received = "", 0
        async for frame in audio:
            received += len(frame)
            pending = np.concatenate([pending, frame])
            while len(pending) >= SYMBOL:
                text += symbol_of(pending[:SYMBOL])
                pending = pending[SYMBOL:]
                yield Partial(text=text, seconds=received / RATE)

    @tensorwire.api
    async def loudness(self, audio: AsyncIterator[Frame]) -> Loudness:
        """Client streaming: one answer once the client has sent its last frame."""
        frames = samples = 0
        energy = peak = 0.0
        async for frame in audio:
            frames += 1
            samples += len(frame)
            energy += float(np.dot(frame, frame))
            peak = max(peak, float(np.abs(frame).max(initial=0.0)))
        rms = (energy / samples) ** 0.5 if samples else 0.0
        return Loudness(frames=frames, seconds=samples / RATE, rms=rms, peak=peak)

    @tensorwire.api
    def word_count(self, lines: Iterator[str], /) -> Generator[int, None, None]:
        """A `def` takes `Iterator[T]` (run in the thread pool): the running count of
        words after each line of text."""
        total = 0
        for line in lines:
            total += len(line.split())
            yield total
