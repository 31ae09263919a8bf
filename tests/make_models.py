"""Model files made with the real exporters, as third parties make them.

Run as `python make_models.py KIND PATH` (tests call it in a subprocess, so
TensorFlow and torch never share the test process). Each KIND follows the
convention of the exporter that writes such files in the wild.
"""

from __future__ import annotations

import sys


def keras2_hdf5(path: str) -> None:
    """A Keras HDF5 file (the Keras 2 format) with a dynamic batch: input_1 ?x64x64x1."""
    import keras

    inputs = keras.Input((64, 64, 1), name="input_1")
    hidden = keras.layers.Conv2D(4, 3, activation="relu")(inputs)
    outputs = keras.layers.Dense(3)(keras.layers.GlobalAveragePooling2D()(hidden))
    model = keras.Model(inputs, outputs)
    model.compile(optimizer="adam", loss="mse")  # old files carry a training config
    model.save(path if path.endswith(".h5") else path + ".h5")
    if not path.endswith(".h5"):
        import os

        os.replace(path + ".h5", path)  # e.g. ".hdf5", as Keras 2 users name them


def torchscript_with_int(path: str) -> None:
    """A TorchScript archive named .jit whose forward takes a plain int (a sample rate)."""
    import torch

    class Gain(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(16, 2)

        def forward(self, x: torch.Tensor, sr: int) -> torch.Tensor:
            if sr not in (8000, 16000):
                raise ValueError("unsupported sample rate")
            return self.linear(x) * (sr / 16000.0)

    torch.manual_seed(0)
    torch.jit.save(torch.jit.script(Gain().eval()), path)


def onnx_tf_style(path: str) -> None:
    """ONNX with TensorFlow's input naming (a colon) and a dynamic batch, two outputs
    (float scores and int64 argmax) and an int64 scalar input (a sample rate)."""
    import torch

    class Scores(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(12, 5)

        def forward(self, x: torch.Tensor, sr: torch.Tensor) -> tuple[torch.Tensor, ...]:
            scores = self.linear(x) * (sr.to(torch.float32) / 16000.0)
            return scores, scores.argmax(dim=-1)

    torch.manual_seed(0)
    torch.onnx.export(
        Scores().eval(),
        (torch.randn(2, 12), torch.tensor(16000, dtype=torch.int64)),
        path,
        input_names=["serving_default_input_2:0", "sr"],
        output_names=["StatefulPartitionedCall:0", "StatefulPartitionedCall:1"],
        dynamic_axes={"serving_default_input_2:0": {0: "batch"}},
        dynamo=False,
    )


def exported_program(path: str) -> None:
    """A torch.export program (.pt2) with a dynamic batch."""
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU()).eval()
    batch = torch.export.Dim("batch", min=1, max=1024)
    program = torch.export.export(model, (torch.randn(2, 8),), dynamic_shapes=({0: batch},))
    torch.export.save(program, path)


def savedmodel(path: str) -> None:
    """A SavedModel with a serving_default signature, saved by tf.saved_model (not Keras)."""
    import tensorflow as tf

    class Scale(tf.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = tf.Variable(tf.random.stateless_normal((6, 3), seed=(1, 2)))

        @tf.function(input_signature=[tf.TensorSpec([None, 6], tf.float32, name="features")])
        def serve(self, features: tf.Tensor) -> dict[str, tf.Tensor]:
            logits = tf.matmul(features, self.weight)
            return {"logits": logits, "label": tf.argmax(logits, axis=-1)}

    module = Scale()
    tf.saved_model.save(module, path, signatures={"serving_default": module.serve})


MAKERS = {
    "keras2-hdf5": keras2_hdf5,
    "torchscript-int": torchscript_with_int,
    "onnx-tf-style": onnx_tf_style,
    "pt2": exported_program,
    "savedmodel": savedmodel,
}

if __name__ == "__main__":
    MAKERS[sys.argv[1]](sys.argv[2])
