"""ONNX Runtime: the exported reference models and user ONNX files."""
