"""Model files made with the real exporters, as third parties make them.

Run as `python make_models.py KIND PATH` (tests call it in a subprocess, so
TensorFlow and torch never share the test process), or as
`python make_models.py --into FOLDER KIND...` to make several kinds in one
process (FOLDER/KIND/model each, or FOLDER/KIND.error saying why not): the
TensorFlow kinds are made so, once per test session. Each KIND follows the
convention of the exporter that writes such files in the wild.
"""

from __future__ import annotations

import sys


def keras2_hdf5(path: str) -> None:
    """A Keras 2 HDF5 file (as tf.keras 2.x wrote them) with a dynamic batch: input_1 ?x64x64x1.

    Keras 3 cannot write Keras 2's conventions, so its HDF5 file is rewritten
    to them: `batch_input_shape`, plain dtype strings, `[[name, 0, 0, {}]]`
    inbound nodes, initializers without a module, weights named "kernel:0",
    and a 2.x keras_version.
    """
    import json

    import h5py
    import keras

    inputs = keras.Input((64, 64, 1), name="input_1")
    hidden = keras.layers.Conv2D(4, 3, activation="relu")(inputs)
    outputs = keras.layers.Dense(3)(keras.layers.GlobalAveragePooling2D()(hidden))
    model = keras.Model(inputs, outputs)
    model.compile(optimizer="adam", loss="mse")  # old files carry a training config
    written = path + ".h5"
    model.save(written)
    with h5py.File(written, "r+") as file:
        config = json.loads(file.attrs["model_config"])
        for layer in config["config"]["layers"]:
            _keras2_layer(layer)
        for key in ("input_layers", "output_layers"):
            config["config"][key] = [config["config"][key]]
        file.attrs["model_config"] = json.dumps(config)
        file.attrs["keras_version"] = "2.13.1"
        weights = file["model_weights"]
        weights.attrs["keras_version"] = "2.13.1"
        for name in weights.attrs["layer_names"]:
            group = weights[name]
            names = [n.decode() if isinstance(n, bytes) else str(n)
                     for n in group.attrs["weight_names"]]  # fmt: skip
            for weight in names:
                group.move(weight, f"{weight}:0")
            group.attrs["weight_names"] = [f"{n}:0".encode() for n in names]
        del file.attrs["training_config"]  # Keras 3's optimizer config means nothing to 2.x
    import os

    os.replace(written, path)  # e.g. ".hdf5", as Keras 2 users name them


def keras3(path: str, unsafe_lambda: bool = False) -> None:
    """A Keras 3 `.keras` file; with a Lambda layer, which only unsafe loading reads."""
    import keras

    if not path.endswith(".keras"):  # Keras 3 saves to no other name
        path += ".keras"
    last = keras.layers.Lambda(lambda t: 2 * t) if unsafe_lambda else keras.layers.Dense(4)
    keras.Sequential([keras.Input((8,), name="features"), last]).save(path)


def _keras2_layer(layer: dict) -> None:
    settings = layer["config"]
    if "batch_shape" in settings:
        settings["batch_input_shape"] = settings.pop("batch_shape")
    settings.pop("optional", None)
    if isinstance(settings.get("dtype"), dict):
        settings["dtype"] = settings["dtype"]["config"]["name"]
    for value in settings.values():
        if isinstance(value, dict):
            value.pop("module", None)
            value.pop("registered_name", None)
    layer["inbound_nodes"] = [
        [[*arg["config"]["keras_history"], {}] for arg in node["args"]]
        for node in layer["inbound_nodes"]
    ]


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


def keras2_savedmodel(path: str, signed: bool = True) -> None:
    """A Keras 2 text classifier saved as a SavedModel with its optimizer's state, as
    tf.keras 2.x saved a model after training: a string input through a StringLookup (a
    table the serving graph initialises) beside float features; written by tf_keras.

    The optimizer is Keras 2's OptimizerV2 (`tf_keras.optimizers.legacy`, every
    Keras 2 optimizer up to 2.10): its slot variables are saved as such, and
    `tf.saved_model.load` rebuilds them only through tf_keras. `signed=False` saves it
    without a serving signature, as `model.save(..., signatures={})` does.
    """
    import numpy as np
    import tf_keras as keras

    text = keras.Input((), dtype="string", name="text")
    features = keras.Input((6,), name="features")
    ids = keras.layers.StringLookup(vocabulary=["cat", "dog", "naïve"])(text)
    embedded = keras.layers.Embedding(5, 4)(ids)
    joined = keras.layers.Concatenate()([embedded, features])
    model = keras.Model([text, features], keras.layers.Dense(3, name="scores")(joined))
    model.compile(optimizer=keras.optimizers.legacy.Adam(), loss="mse")
    rng = np.random.default_rng(0)
    samples = {"text": np.array(["cat", "dog", "naïve", "emu"]),
               "features": rng.standard_normal((4, 6)).astype(np.float32)}  # fmt: skip
    model.fit(samples, np.zeros((4, 3), np.float32), epochs=1, verbose=0)  # slots exist
    model.save(path, save_format="tf", **({} if signed else {"signatures": {}}))


def tf2onnx_savedmodel(path: str) -> None:
    """An ONNX file written by tf2onnx's own converter from a SavedModel, as TensorFlow
    users export: an int64 scalar input beside the features, two outputs."""
    import subprocess
    import tempfile

    import tensorflow as tf

    class Scaled(tf.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = tf.Variable(tf.random.stateless_normal((12, 4), seed=(3, 4)))

        @tf.function(
            input_signature=[
                tf.TensorSpec([None, 12], tf.float32, name="input_2"),
                tf.TensorSpec([], tf.int64, name="sr"),
            ]
        )
        def serve(self, features: tf.Tensor, sr: tf.Tensor) -> dict[str, tf.Tensor]:
            logits = tf.matmul(features, self.weight) * tf.cast(sr, tf.float32) / 16000.0
            return {"logits": logits, "label": tf.argmax(logits, axis=-1)}

    module = Scaled()
    with tempfile.TemporaryDirectory() as folder:
        tf.saved_model.save(module, folder, signatures={"serving_default": module.serve})
        subprocess.run(
            [sys.executable, "-m", "tf2onnx.convert", "--saved-model", folder,
             "--output", path, "--opset", "17"],
            check=True, capture_output=True,
        )  # fmt: skip


def _small_cnn_onnx(path: str) -> None:
    """A small classifier exported from torch to ONNX: depthwise-separable residual blocks
    (as in MobileNet), where int8 runtimes round differently, and a linear head."""
    import torch

    class Block(torch.nn.Module):
        def __init__(self, channels: int) -> None:
            super().__init__()
            self.depthwise = torch.nn.Conv2d(channels, channels, 3, padding=1, groups=channels)
            self.pointwise = torch.nn.Conv2d(channels, channels, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + self.pointwise(torch.nn.functional.relu6(self.depthwise(x)))

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, 3, stride=2), torch.nn.ReLU6(), Block(32), Block(32),
        torch.nn.Conv2d(32, 64, 1), torch.nn.ReLU6(), torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(), torch.nn.Linear(64, 100),
    ).eval()  # fmt: skip
    torch.onnx.export(
        model, (torch.randn(2, 3, 32, 32),), path, input_names=["x"], output_names=["logits"],
        dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}}, opset_version=17,
        dynamo=False,
    )  # fmt: skip


def onnx_int8_dynamic(path: str) -> None:
    """The small CNN quantized by ONNX Runtime's quantize_dynamic: int8 weights, and
    activations quantized as they come (DynamicQuantizeLinear, ConvInteger, MatMulInteger)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    _small_cnn_onnx(path + ".fp32.onnx")
    quantize_dynamic(path + ".fp32.onnx", path, weight_type=QuantType.QInt8)


def onnx_int8_qdq(path: str) -> None:
    """The small CNN quantized by ONNX Runtime's quantize_static, as QDQ pairs
    (QuantizeLinear, DequantizeLinear), calibrated on four seeded batches."""
    import numpy as np
    from onnxruntime import quantization

    class Batches(quantization.CalibrationDataReader):
        def __init__(self) -> None:
            rng = np.random.default_rng(0)
            shape = (8, 3, 32, 32)
            self.batches = iter([{"x": rng.standard_normal(shape, np.float32)} for _ in range(4)])

        def get_next(self) -> dict | None:
            return next(self.batches, None)

    _small_cnn_onnx(path + ".fp32.onnx")
    int8 = quantization.QuantType.QInt8
    quantization.quantize_static(path + ".fp32.onnx", path, Batches(), per_channel=True,
                                 quant_format=quantization.QuantFormat.QDQ,
                                 activation_type=int8, weight_type=int8)  # fmt: skip


MAKERS = {
    "tf2onnx": tf2onnx_savedmodel,
    "keras2-hdf5": keras2_hdf5,
    "torchscript-int": torchscript_with_int,
    "onnx-tf-style": onnx_tf_style,
    "pt2": exported_program,
    "savedmodel": savedmodel,
    "onnx-int8-dynamic": onnx_int8_dynamic,
    "onnx-int8-qdq": onnx_int8_qdq,
    "keras2-savedmodel": keras2_savedmodel,
    "keras2-savedmodel-unsigned": lambda path: keras2_savedmodel(path, signed=False),
    "keras": keras3,
    "keras-lambda": lambda path: keras3(path, unsafe_lambda=True),
}


def make_into(folder: str, kinds: list[str]) -> None:
    """Each kind in FOLDER/KIND/ (as `model`, with any suffix its exporter insists on), or
    FOLDER/KIND.error saying why not."""
    import os
    import traceback

    for kind in kinds:
        os.makedirs(os.path.join(folder, kind), exist_ok=True)
        try:
            MAKERS[kind](os.path.join(folder, kind, "model"))
        except Exception:  # one kind's failure (a missing exporter) is its own
            with open(os.path.join(folder, f"{kind}.error"), "w") as error:
                error.write(traceback.format_exc())


if __name__ == "__main__":
    from dlbench.backends.framework_guard import INCIDENTAL_LIBRARIES, hide_packages

    # what TensorFlow imports only because it is installed, hidden as in dlbench's
    # workers: no exporter here uses it (jax: tf.lite's; the rest: Keras's wrappers)
    hide_packages(["jax", *INCIDENTAL_LIBRARIES])
    if sys.argv[1] == "--into":
        make_into(sys.argv[2], sys.argv[3:])
    else:
        MAKERS[sys.argv[1]](sys.argv[2])
