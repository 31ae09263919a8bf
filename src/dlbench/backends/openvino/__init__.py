"""OpenVINO: the exported reference models and user ONNX files (CPU)."""
