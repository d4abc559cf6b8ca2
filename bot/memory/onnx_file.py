"""The tensors of an ONNX file and the order its MatMul nodes use them, read with protobuf alone.

An ONNX file is one protobuf message (`ModelProto`). The `onnx` package would read it,
but importing it loads `ml_dtypes`, which alone takes longer than the whole model load;
the few messages and fields needed here are declared below (field numbers as in ONNX's
`onnx.proto`) and protobuf skips the rest of the file unread.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

Array = np.ndarray[Any, Any]

# TensorProto.DataType values → numpy types, for the types an int8 export holds.
_DTYPES = {1: np.float32, 3: np.int8, 6: np.int32, 7: np.int64, 9: np.bool_}
_PACKAGE = "chorus.onnx_subset"


@dataclass(frozen=True)
class OnnxContents:
    tensors: dict[str, Array]  # every initializer, by name
    matmul_weights: list[str]  # the second input of each MatMul node, in graph order


@cache
def _model_class() -> Any:
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    field = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(name="chorus_onnx_subset.proto", package=_PACKAGE)
    messages: dict[str, list[tuple[str, int, int, bool, str]]] = {
        "TensorProto": [
            ("dims", 1, field.TYPE_INT64, True, ""),
            ("data_type", 2, field.TYPE_INT32, False, ""),
            ("float_data", 4, field.TYPE_FLOAT, True, ""),
            ("int32_data", 5, field.TYPE_INT32, True, ""),
            ("int64_data", 7, field.TYPE_INT64, True, ""),
            ("name", 8, field.TYPE_STRING, False, ""),
            ("raw_data", 9, field.TYPE_BYTES, False, ""),
        ],
        "NodeProto": [
            ("input", 1, field.TYPE_STRING, True, ""),
            ("op_type", 4, field.TYPE_STRING, False, ""),
        ],
        "GraphProto": [
            ("node", 1, field.TYPE_MESSAGE, True, "NodeProto"),
            ("initializer", 5, field.TYPE_MESSAGE, True, "TensorProto"),
        ],
        "ModelProto": [("graph", 7, field.TYPE_MESSAGE, False, "GraphProto")],
    }
    for name, fields in messages.items():
        message = proto.message_type.add(name=name)
        for field_name, number, kind, repeated, type_name in fields:
            entry = message.field.add(
                name=field_name,
                number=number,
                type=kind,
                label=field.LABEL_REPEATED if repeated else field.LABEL_OPTIONAL,
            )
            if type_name:
                entry.type_name = f".{_PACKAGE}.{type_name}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.ModelProto"))


def read_onnx(path: Path) -> OnnxContents:
    model = _model_class().FromString(path.read_bytes())
    tensors: dict[str, Array] = {}
    for tensor in model.graph.initializer:
        dtype = _DTYPES.get(tensor.data_type)
        if dtype is None:
            continue  # a type the encoder never reads
        values: Array
        if tensor.raw_data:
            values = np.frombuffer(tensor.raw_data, dtype=dtype)
        else:
            stored = tensor.float_data or tensor.int64_data or tensor.int32_data
            values = np.array(stored, dtype=dtype)
        tensors[tensor.name] = values.reshape(tuple(tensor.dims))
    matmuls = [node.input[1] for node in model.graph.node if node.op_type == "MatMul" and len(node.input) > 1]
    return OnnxContents(tensors, matmuls)
