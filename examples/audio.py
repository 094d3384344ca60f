"""Files in and out: audio uploads, files written under `context.temp_dir`, text files.

    tensorwire serve examples.audio:AudioFiles

    curl -F 'audio=@speech.mp3;type=audio/mpeg' localhost:3000/transcribe
    curl -H 'Content-Type: application/json' -d '{"text": "hi"}' localhost:3000/speak -o hi.wav
    curl -F 'file=@notes.txt' -F 'line=one more line' localhost:3000/append -o notes.txt
    curl --data-binary @any.file localhost:3000/checksum

No speech model ships with the project, so `transcribe` is a stand-in that really reads
the upload: it walks the MP3's frame headers and reports what it found (frames, bitrate,
duration). `speak` really writes audio: one tone per character, as a WAV file.
"""

from __future__ import annotations

import hashlib
import math
import struct
import typing as t
import wave
from pathlib import Path

from pydantic import Field

import tensorwire
from tensorwire.validators import ContentType

# MPEG-1 Layer III: bitrate index -> kbit/s, sample-rate index -> Hz.
_BITRATES = [0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 0]
_RATES = [44100, 48000, 32000, 0]


def mp3_frames(data: bytes) -> tuple[int, int, float]:
    """(frames, mean bitrate kbit/s, seconds) of an MPEG-1 Layer III stream."""
    pos = 0
    if data[:3] == b"ID3" and len(data) >= 10:  # skip the ID3v2 tag (syncsafe size)
        size = (data[6] << 21) | (data[7] << 14) | (data[8] << 7) | data[9]
        pos = 10 + size
    frames, bits, seconds = 0, 0, 0.0
    while pos + 4 <= len(data):
        b1, b2 = data[pos + 1], data[pos + 2]
        if data[pos] != 0xFF or (b1 & 0xFE) != 0xFA:  # sync, MPEG-1, Layer III
            pos += 1
            continue
        kbps, rate = _BITRATES[b2 >> 4], _RATES[(b2 >> 2) & 3]
        if not kbps or not rate:
            pos += 1
            continue
        length = 144 * kbps * 1000 // rate + ((b2 >> 1) & 1)
        frames += 1
        bits += kbps
        seconds += 1152 / rate
        pos += length
    return frames, (bits // frames if frames else 0), seconds


@tensorwire.service
class AudioFiles:
    """Audio and text files: uploads checked by media type, files written per request."""

    @tensorwire.api
    def transcribe(self, audio: t.Annotated[Path, ContentType("audio/mp3")]) -> str:
        """Describe an MP3 upload (a stand-in for a speech-to-text model)."""
        frames, kbps, seconds = mp3_frames(audio.read_bytes())
        if not frames:
            raise tensorwire.errors.InvalidArgument.at(["audio"], "no MP3 frames found")
        return f"{frames} MP3 frames at {kbps} kbit/s: {seconds:.2f} s of audio"

    @tensorwire.api
    def speak(
        self,
        text: str = Field(min_length=1, max_length=200, description="What to say."),
        rate: int = Field(default=8000, ge=4000, le=48000, description="Samples/second."),
        *,
        context: tensorwire.Context,
    ) -> t.Annotated[Path, ContentType("audio/wav")]:
        """Text to a WAV file (one short tone per character), written in the temp dir."""
        out = context.temp_dir / "speech.wav"
        with wave.open(str(out), "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(rate)
            n = rate // 20
            for ch in text:
                freq = 200 + (ord(ch) % 64) * 20
                w.writeframes(b"".join(
                    struct.pack("<h", int(8000 * math.sin(2 * math.pi * freq * i / rate)))
                    for i in range(n)))
        return out

    @tensorwire.api
    def append(
        self,
        file: t.Annotated[Path, ContentType("text/*")],
        line: str = Field(max_length=10_000),
        *,
        context: tensorwire.Context,
    ) -> t.Annotated[Path, ContentType("text/plain")]:
        """Append a line to an uploaded text file and send the file back."""
        # The client's file name is metadata (never a path): ctx.state["uploads"].
        info = context.state["uploads"][file]
        stem = "".join(c for c in Path(info.filename or "notes").stem if c.isalnum()) or "notes"
        out = context.temp_dir / f"{stem}.txt"
        text = file.read_text(encoding="utf-8")
        if text and not text.endswith("\n"):
            text += "\n"
        out.write_text(text + line + "\n", encoding="utf-8")
        return out

    @tensorwire.api
    def checksum(self, file: Path, /) -> dict[str, t.Any]:
        """Root input: the body is the file, of any type (spooled to disk, then hashed)."""
        digest = hashlib.sha256()
        with open(file, "rb") as f:
            while chunk := f.read(1 << 20):
                digest.update(chunk)
        return {"sha256": digest.hexdigest(), "size": file.stat().st_size,
                "suffix": file.suffix}
