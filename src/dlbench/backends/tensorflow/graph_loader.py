"""A SavedModel that `tf.saved_model.load` cannot restore, served through TF1's loader.

`tf.saved_model.load` rebuilds every Python object the SavedModel saved. A Keras 2
model saved with its optimizer holds that optimizer's slot variables, which only
Keras 2 (`tf_keras`) knows how to rebuild: with Keras 3 alone, TensorFlow fails
with "'_UserObject' object has no attribute 'add_slot'". TF1's loader
(`tf.compat.v1.saved_model.loader.load`) needs only the serving graph and its
variables, as TensorFlow Serving does: it imports the graph into a `tf.Graph`,
restores the variables in a `tf.compat.v1.Session`, and the serving signature
names the tensors to feed and fetch. Such a model runs as a graph, so only in
the `function` compile mode.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from typing import TYPE_CHECKING

import numpy as np
import tensorflow as tf

from dlbench.backends.base import load_failure
from dlbench.backends.tensorflow.signatures import dims, dtype_name, pick_signature
from dlbench.errors import CaseError
from dlbench.spec.model_signature import InputSpec

if TYPE_CHECKING:
    from tensorflow.core.protobuf.meta_graph_pb2 import SignatureDef

V1_LOADER = "tf.compat.v1.saved_model.loader.load"


class GraphSignature:
    """The serving signature of a SavedModel imported into a graph, with its session."""

    def __init__(self, session: tf.compat.v1.Session, signature: SignatureDef) -> None:
        self._session = session
        # outputs in name order, as the tf.saved_model.load path returns them
        self._output_keys = sorted(signature.outputs)
        self._feed_names = {key: info.name for key, info in signature.inputs.items()}
        self._fetch_names = [signature.outputs[key].name for key in self._output_keys]
        self.inputs = [_spec(key, info) for key, info in signature.inputs.items()]
        self.outputs = [_spec(key, signature.outputs[key]) for key in self._output_keys]

    def runner(self, arrays: dict[str, np.ndarray]) -> Callable[[], list[np.ndarray]]:
        """One call of the signature on `arrays`, every output fetched as a NumPy array.

        The callable is made, and the feeds put in order, here: the timed call is the
        session's run alone, and it returns once the outputs are on the host.
        """
        names = list(arrays)
        graph = self._session.graph
        run = self._session.make_callable(
            [graph.get_tensor_by_name(name) for name in self._fetch_names],
            feed_list=[graph.get_tensor_by_name(self._feed_names[name]) for name in names],
        )
        values = [arrays[name] for name in names]
        return lambda: list(run(*values))


def load_graph_signature(path: str, name: str, cause: str, device: str | None) -> GraphSignature:
    """The SavedModel's serving signature through TF1's loader, on `device` (a TensorFlow
    device name) where given; a CaseError naming both loaders' causes where it fails too."""
    graph = tf.Graph()
    session = tf.compat.v1.Session(graph=graph)  # threads: the context's config, as set
    try:
        with graph.as_default(), tf.device(device) if device else nullcontext():
            # clear_devices: the devices the saving machine recorded are not this one's
            meta_graph = tf.compat.v1.saved_model.loader.load(
                session, [tf.saved_model.SERVING], path, clear_devices=True
            )
    except Exception as exc:
        session.close()
        raise load_failure(
            f"TensorFlow {tf.__version__} cannot load SavedModel {name}: tf.saved_model.load "
            f"cannot restore {cause}, and TF1's loader fails too",
            exc,
        ) from None
    # "__saved_model_init_op" and the like are TensorFlow's own entries, not signatures
    signatures = {key: value for key, value in meta_graph.signature_def.items()
                  if not key.startswith("__saved_model_")}  # fmt: skip
    if not signatures:
        session.close()
        raise CaseError(
            f"SavedModel {name}: tf.saved_model.load cannot restore {cause}, and it has no "
            "signature to serve through TF1's loader"
        )
    return GraphSignature(session, signatures[pick_signature(signatures, name)])


def _spec(key: str, info: tf.compat.v1.TensorInfo) -> InputSpec:
    shape = tf.TensorShape(info.tensor_shape)
    return InputSpec(key, dims(shape), dtype_name(tf.dtypes.as_dtype(info.dtype)))
