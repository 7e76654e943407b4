"""Audio files: the facts a speech dataset's checks need, headers first.

Header facts (rate, channels, frames, codec) come without decoding: WAV from its RIFF
chunks and FLAC from its STREAMINFO block with the standard library; OGG/Vorbis, Opus,
MP3 and anything else through libsndfile (`soundfile`, the optional `speech` extra).
Sample facts (peak, clipped samples, the longest silence) need the samples: a PCM/float
WAV is decoded from the bytes already read with numpy, other formats through soundfile in
blocks, so memory is bounded by one file (one block for soundfile). Without soundfile the
sample facts are absent with a reason, and the checks that need them are NOT-CHECKED.

Every file is opened with `open_regular` (a FIFO or a device is refused before a byte is
read) and read to at most `max_bytes`. `scan_audio` reads many files on all cores
(processes), reporting progress; the result is the same on any number of cores.

RIFF/WAVE shape (little-endian):

    "RIFF" <u32 size> "WAVE"  then chunks:  <4-byte id> <u32 size> <data, padded to even>
    "fmt " : <u16 format> <u16 channels> <u32 rate> <u32 byte_rate> <u16 block_align> <u16 bits>
             [<u16 cb_size> <u16 valid_bits> <u32 mask> <16-byte subformat GUID>]  (0xFFFE)
    "data" : frames * block_align bytes of interleaved samples

FLAC: "fLaC", then metadata blocks <u8 last|type> <u24 length>; STREAMINFO (type 0)
holds 20 bits rate, 3 bits channels-1, 5 bits bits-1, 36 bits total samples.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

import xxhash

from .common import open_regular

# Suffixes a speech folder's audio files carry (what libsndfile and the usual TTS
# loaders read).
AUDIO_SUFFIXES = (".wav", ".flac", ".ogg", ".opus", ".mp3")

# Bytes read from one audio file: a 16-bit mono hour at 48 kHz is 330 MiB; a bigger file
# is not a training utterance. Past the cap the header is still read, the samples are not.
MAX_AUDIO_BYTES = 512 * 1024 * 1024
# Frames decoded per soundfile block: 64k frames of float32 stereo are 512 KiB.
_BLOCK_FRAMES = 1 << 16
# A WAV's chunks are walked within this many bytes of the file's start (a long LIST or
# JUNK chunk before `fmt ` is skipped by its size, never read).
_HEADER_BYTES = 64 * 1024

_PCM, _FLOAT, _EXTENSIBLE = 1, 3, 0xFFFE


@dataclass(frozen=True, slots=True, kw_only=True)
class AudioHeader:
    """What a file's header says, without decoding a sample."""

    container: str  # "wav", "flac", or libsndfile's format name ("OGG", "MP3", ...)
    codec: str  # "pcm16", "float32", "flac", libsndfile's subtype ("VORBIS", ...)
    sample_rate: int
    channels: int
    frames: int
    bits: int = 0  # bits per sample where the header says (0: not stated)

    @property
    def duration(self) -> float:
        return self.frames / self.sample_rate if self.sample_rate > 0 else 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class SampleStats:
    """Facts from every sample of a file (full scale is 1.0)."""

    peak: float  # the largest |sample| over all channels
    clipped: int  # samples at or above the clip level asked for
    longest_silence: float  # seconds: the longest run with every channel below the silence level
    silence_start: float  # seconds: where that run starts


@dataclass(frozen=True, slots=True, kw_only=True)
class SampleOptions:
    """What the sample pass measures against (the clipping and silence rules' limits)."""

    clip_level: float = 0.999
    silence_level: float = 0.005
    decode: bool = True  # False: headers and hashes only


@dataclass(frozen=True, slots=True, kw_only=True)
class AudioFacts:
    """One audio file as read: `problem` says why it could not be (missing, not a
    regular file, unreadable, truncated), else `header` holds its facts."""

    path: str
    size: int = 0
    digest: int | None = None  # 8-byte hash of the file's bytes (byte-identical audio)
    header: AudioHeader | None = None
    problem: str = ""  # "" | "missing" | "not-regular" | "unreadable" | "truncated" | "too-big"
    detail: str = ""  # the one-line reason for `problem`
    samples: SampleStats | None = None
    samples_note: str = ""  # why `samples` is None


class AudioError(Exception):
    """A header that cannot be read; `kind` is "unreadable" or "truncated"."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def soundfile_missing() -> str | None:
    """Why libsndfile cannot be used here, or None when it can."""
    try:
        import soundfile  # type: ignore[import-untyped,unused-ignore]  # noqa: F401  # optional: the `speech` extra
        import numpy  # noqa: F401  # soundfile's own dependency
    except (ImportError, OSError) as e:  # OSError: the package is there, libsndfile is not
        return f"soundfile (libsndfile) is not usable: {type(e).__name__}: {e}; pip install 'trainproof-lsp[speech]'"
    return None


# --- headers ------------------------------------------------------------------------------

def wav_header(head: bytes, size: int) -> tuple[AudioHeader, int, int, int]:
    """(header, data offset, data bytes present, format tag) of a RIFF/WAVE file whose
    first bytes are `head` and whose size is `size`. AudioError when the header cannot be
    read or the data chunk declares more bytes than the file holds."""
    if len(head) < 12 or head[:4] != b"RIFF" or head[8:12] != b"WAVE":
        raise AudioError("unreadable", "not a RIFF/WAVE file")
    pos = 12
    fmt: tuple[int, int, int, int, int, int] | None = None
    while pos + 8 <= len(head):
        cid, clen = head[pos:pos + 4], struct.unpack_from("<I", head, pos + 4)[0]
        body = pos + 8
        if cid == b"fmt ":
            if clen < 16 or body + 16 > len(head):
                raise AudioError("truncated", f"fmt chunk of {clen} bytes cut off at byte {len(head)}")
            tag, channels, rate, _byte_rate, align, bits = struct.unpack_from("<HHIIHH", head, body)
            if tag == _EXTENSIBLE and clen >= 40 and body + 26 <= len(head):
                tag = struct.unpack_from("<H", head, body + 24)[0]  # the subformat GUID's first two bytes
            fmt = (tag, channels, rate, align, bits, clen)
        elif cid == b"data":
            if fmt is None:
                raise AudioError("unreadable", "data chunk before any fmt chunk")
            tag, channels, rate, align, bits, _ = fmt
            if channels < 1 or rate < 1 or align < 1:
                raise AudioError("unreadable", f"fmt chunk says {channels} channel(s), {rate} Hz, "
                                               f"block align {align}")
            present = max(0, size - body)
            if clen == 0xFFFFFFFF:  # a stream written without knowing its length: to the end
                clen = present
            if clen > present:
                raise AudioError("truncated", f"data chunk declares {clen:,} bytes, the file holds {present:,} "
                                              f"(cut {clen - present:,} bytes short)")
            codec = {_PCM: f"pcm{bits}", _FLOAT: f"float{bits}"}.get(tag, f"format-0x{tag:04x}")
            return (AudioHeader(container="wav", codec=codec, sample_rate=rate, channels=channels,
                                frames=clen // align, bits=bits), body, clen, tag)
        pos = body + clen + (clen & 1)
    if fmt is None:
        raise AudioError("truncated" if size <= len(head) else "unreadable",
                         f"no fmt chunk in the first {min(size, _HEADER_BYTES):,} bytes")
    raise AudioError("truncated" if pos >= size else "unreadable",
                     f"no data chunk in the first {min(size, _HEADER_BYTES):,} bytes")


def flac_header(head: bytes) -> AudioHeader:
    """The STREAMINFO facts of a FLAC file whose first bytes are `head`."""
    if len(head) < 4 + 4 + 18 or head[:4] != b"fLaC":
        raise AudioError("truncated" if head[:4] == b"fLaC" else "unreadable", "FLAC STREAMINFO cut off")
    kind, length = head[4] & 0x7F, int.from_bytes(head[5:8], "big")
    if kind != 0 or length < 34:
        raise AudioError("unreadable", "FLAC without a STREAMINFO block first")
    bits = int.from_bytes(head[18:26], "big")  # rate:20 channels-1:3 bits-1:5 total:36
    rate, channels, depth, total = bits >> 44, ((bits >> 41) & 0x7) + 1, ((bits >> 36) & 0x1F) + 1, bits & (2**36 - 1)
    if rate == 0:
        raise AudioError("unreadable", "FLAC STREAMINFO says 0 Hz")
    return AudioHeader(container="flac", codec=f"flac{depth}", sample_rate=rate, channels=channels, frames=total,
                       bits=depth)


def _soundfile_header(path: str) -> AudioHeader:
    import soundfile  # type: ignore[import-untyped,unused-ignore]  # optional (`speech` extra): formats beyond WAV/FLAC

    try:
        info = soundfile.info(path)
    except Exception as e:  # libsndfile's own errors (LibsndfileError, RuntimeError) on a bad file
        raise AudioError("unreadable", " ".join(str(e).split())[:200] or type(e).__name__) from None
    return AudioHeader(container=str(info.format), codec=str(info.subtype), sample_rate=int(info.samplerate),
                       channels=int(info.channels), frames=int(info.frames))


# --- samples ------------------------------------------------------------------------------

class _Runs:
    """Sample stats over blocks of frames, the silent run carried across blocks."""

    def __init__(self, options: SampleOptions) -> None:
        self.options = options
        self.peak = 0.0
        self.clipped = 0
        self.carry = 0  # silent frames at the end of the blocks so far
        self.longest = 0
        self.longest_start = 0
        self.seen = 0

    def add(self, block: Any, *, owned: bool = False) -> None:
        """One block of frames (n, channels) or (n,). `owned`: the block is a scratch copy
        this may overwrite (its magnitudes are taken in place: one pass, no new array)."""
        import numpy as np  # soundfile's dependency: present whenever samples are read

        n = int(block.shape[0])
        if n == 0:
            return
        size = np.abs(block, out=block) if owned and block.flags.writeable else np.abs(block)
        if size.ndim == 2 and size.shape[1] > 1:
            mag = size.max(axis=1)
        else:
            mag = size.reshape(-1)
        self.peak = max(self.peak, float(mag.max()))
        self.clipped += int(np.count_nonzero(size >= self.options.clip_level))
        loud = np.flatnonzero(mag > self.options.silence_level)
        if loud.size == 0:
            self.carry += n
            self._offer(self.carry, self.seen + n - self.carry)
        else:
            self._offer(self.carry + int(loud[0]), self.seen - self.carry)
            if loud.size > 1:
                gaps = np.diff(loud) - 1
                i = int(gaps.argmax())
                self._offer(int(gaps[i]), self.seen + int(loud[i]) + 1)
            self.carry = n - 1 - int(loud[-1])
            self._offer(self.carry, self.seen + n - self.carry)
        self.seen += n

    def _offer(self, length: int, start: int) -> None:
        if length > self.longest:
            self.longest, self.longest_start = length, start

    def stats(self, rate: int) -> SampleStats:
        return SampleStats(peak=round(self.peak, 6), clipped=self.clipped,
                           longest_silence=round(self.longest / rate, 4),
                           silence_start=round(self.longest_start / rate, 4))


def _wav_samples(data: bytes, header: AudioHeader, offset: int, length: int, tag: int,
                 options: SampleOptions) -> SampleStats | None:
    """PCM 8/16/32-bit and float 32/64 WAV samples decoded from the file's bytes; None for
    other encodings (soundfile decodes those)."""
    import numpy as np  # soundfile's dependency: present whenever samples are read

    bits = header.bits
    kinds = {(_PCM, 8): ("u1", 128.0, 128.0), (_PCM, 16): ("<i2", 0.0, 32768.0), (_PCM, 32): ("<i4", 0.0, 2.0**31),
             (_FLOAT, 32): ("<f4", 0.0, 1.0), (_FLOAT, 64): ("<f8", 0.0, 1.0)}
    kind = kinds.get((tag, bits))
    if kind is None:
        return None
    dtype, zero, scale = kind
    width = np.dtype(dtype).itemsize
    usable = (length // (width * header.channels)) * width * header.channels
    raw = np.frombuffer(data, dtype=dtype, count=usable // width, offset=offset)
    frames = raw.reshape(-1, header.channels)
    if zero or scale != 1.0:
        # In place on one float32 copy; scale is a power of two, so multiplying by its
        # inverse gives exactly the quotient.
        values = frames.astype(np.float32)
        if zero:
            values -= np.float32(zero)
        values *= np.float32(1.0 / scale)
        owned = True
    else:
        values, owned = frames, False
    runs = _Runs(options)
    runs.add(values, owned=owned)
    return runs.stats(header.sample_rate)


def _soundfile_samples(path: str, header: AudioHeader, options: SampleOptions) -> SampleStats:
    import soundfile  # type: ignore[import-untyped,unused-ignore]  # optional (`speech` extra): decoding beyond PCM WAV

    runs = _Runs(options)
    try:
        for block in soundfile.blocks(path, blocksize=_BLOCK_FRAMES, dtype="float32", always_2d=True):
            runs.add(block)
    except Exception as e:  # libsndfile's errors on a damaged stream
        raise AudioError("unreadable", "decoding failed: " + (" ".join(str(e).split())[:200] or type(e).__name__)) \
            from None
    return runs.stats(header.sample_rate)


# --- one file, many files ------------------------------------------------------------------

def read_audio(path: str, options: SampleOptions = SampleOptions(), *, max_bytes: int = MAX_AUDIO_BYTES,
               sndfile: bool | None = None) -> AudioFacts:
    """One audio file's facts; never raises for a bad file (its `problem` says why).
    `sndfile`: whether soundfile may be used (None: if it is installed)."""
    if sndfile is None:
        sndfile = soundfile_missing() is None
    try:
        fh = open_regular(path)
    except FileNotFoundError:
        return AudioFacts(path=path, problem="missing", detail="no such file")
    except OSError as e:
        kind = "not-regular" if "regular file" in str(e.strerror or "") else "unreadable"
        return AudioFacts(path=path, problem=kind, detail=str(e.strerror or e))
    with fh:
        size = os.fstat(fh.fileno()).st_size
        if size > max_bytes:
            data = fh.read(_HEADER_BYTES)
            hasher = xxhash.xxh3_64(data)
            while block := fh.read(1 << 22):  # hashed in pieces: never held whole
                hasher.update(block)
            digest, whole = hasher.intdigest(), False
        else:
            # The size the file has now (+1: one that grew meanwhile is seen to); never
            # read(max_bytes), which allocates the whole cap for every small file.
            data = fh.read(size + 1)
            if len(data) > max_bytes:
                data = data[:max_bytes + 1]
            digest, whole = xxhash.xxh3_64_intdigest(data), True
    head = data[:_HEADER_BYTES] if len(data) > _HEADER_BYTES else data
    wav: tuple[AudioHeader, int, int, int] | None = None
    try:
        if head[:4] == b"RIFF":
            wav = wav_header(head if whole else data, size)
            header = wav[0]
        elif head[:4] == b"fLaC":
            header = flac_header(head)
        elif sndfile:
            header = _soundfile_header(path)
        else:
            return AudioFacts(path=path, size=size, digest=digest, problem="unreadable",
                              detail=f"not a WAV or FLAC file; other formats need soundfile ({soundfile_missing()})")
    except AudioError as e:
        return AudioFacts(path=path, size=size, digest=digest, problem=e.kind, detail=str(e))
    if not options.decode:
        note = "samples not decoded"
    elif not sndfile:
        note = "soundfile (libsndfile) is not installed: samples not decoded"
    elif not whole:
        note = f"{size:,} bytes, over the {max_bytes:,}-byte cap: samples not decoded"
    else:
        note = ""
    if note:
        return AudioFacts(path=path, size=size, digest=digest, header=header, samples_note=note)
    try:
        stats = _wav_samples(data, header, wav[1], wav[2], wav[3], options) if wav is not None else None
        if stats is None:
            stats = _soundfile_samples(path, header, options)
    except AudioError as e:
        return AudioFacts(path=path, size=size, digest=digest, header=header, problem=e.kind, detail=str(e))
    except (ValueError, MemoryError) as e:  # a header whose numbers do not fit its bytes
        return AudioFacts(path=path, size=size, digest=digest, header=header, problem="unreadable",
                          detail=f"samples: {type(e).__name__}: {e}")
    return AudioFacts(path=path, size=size, digest=digest, header=header, samples=stats)


def read_header(path: str, *, sndfile: bool | None = None) -> AudioHeader | None:
    """A file's header facts alone, from its first bytes (WAV, FLAC; other formats through
    soundfile when it is there); None when the file cannot be read or is not audio. For a
    corpus's durations without reading its samples (the editor's hover)."""
    try:
        with open_regular(path) as fh:
            size = os.fstat(fh.fileno()).st_size
            head = fh.read(_HEADER_BYTES)
    except OSError:
        return None
    try:
        if head[:4] == b"RIFF":
            return wav_header(head, size)[0]
        if head[:4] == b"fLaC":
            return flac_header(head)
        if sndfile if sndfile is not None else soundfile_missing() is None:
            return _soundfile_header(path)
    except AudioError:
        return None
    return None


def _read_many(args: tuple[tuple[str, ...], SampleOptions, int, bool]) -> list[AudioFacts]:
    paths, options, max_bytes, sndfile = args
    return [read_audio(p, options, max_bytes=max_bytes, sndfile=sndfile) for p in paths]


# Files per task handed to a worker process: enough that the hand-over costs little
# beside reading them, few enough that progress moves and the cores stay even.
_TASK_FILES = 64


def scan_audio(paths: Iterable[str], options: SampleOptions = SampleOptions(), *, jobs: int | None = None,
               progress: Callable[[int, int], None] | None = None,
               max_bytes: int = MAX_AUDIO_BYTES) -> Mapping[str, AudioFacts]:
    """Every file's facts, by path (each path once). `jobs`: worker processes (None: every
    core; 1: in this process). `progress(done, total)` is called as files are read."""
    unique = list(dict.fromkeys(paths))
    total = len(unique)
    sndfile = soundfile_missing() is None
    jobs = (os.cpu_count() or 1) if jobs is None else max(1, jobs)
    out: dict[str, AudioFacts] = {}
    tasks = [tuple(unique[i:i + _TASK_FILES]) for i in range(0, total, _TASK_FILES)]
    if jobs == 1 or len(tasks) < 2:
        for task in tasks:
            for facts in _read_many((task, options, max_bytes, sndfile)):
                out[facts.path] = facts
            if progress is not None:
                progress(len(out), total)
        return out
    # Imported here: concurrent.futures.process registers an exit hook when imported, which a
    # language server exiting while its engine preloads (readers/detect imports this module)
    # must not meet; the command line does not pay for it either until audio is read.
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=min(jobs, len(tasks))) as pool:
        for batch in pool.map(_read_many, [(t, options, max_bytes, sndfile) for t in tasks]):
            for facts in batch:
                out[facts.path] = facts
            if progress is not None:
                progress(len(out), total)
    return out


def is_audio_name(name: str) -> bool:
    return name.lower().endswith(AUDIO_SUFFIXES)


__all__ = ["AudioFacts", "AudioHeader", "SampleStats", "SampleOptions", "AudioError", "read_audio", "scan_audio",
           "read_header",
           "wav_header", "flac_header", "soundfile_missing", "AUDIO_SUFFIXES", "MAX_AUDIO_BYTES", "is_audio_name"]
